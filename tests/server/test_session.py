"""Session ids (#12): sealed, validated without a table, bound to the principal, expiring."""

from __future__ import annotations

import re

import msgspec
import pytest

from mrtr.server import Binding, Sealer
from mrtr.server._sealing import digest_arguments
from mrtr.server.sessions._session import (
    SessionInfo,
    Sessions,
    UnknownSession,
    session_capabilities,
)

KEY = bytes(range(32))
INFO = SessionInfo(version="2025-11-25", capabilities={"sampling": {}},
                   client_info={"name": "c", "version": "1"})
INFO_BYTES = msgspec.msgpack.encode(INFO)


def sessions(now: list[float], key: bytes = KEY) -> Sessions:
    sealer = Sealer(keys=[key], audience="app", clock=lambda: now[0])
    return Sessions(sealer.for_audience("app mcp-session", ttl=3600.0))


def test_an_id_is_visible_ascii_and_unique() -> None:
    table = sessions([1000.0])
    first, second = table.open(INFO, None), table.open(INFO, None)
    assert first.id != second.id
    assert re.fullmatch(r"[\x21-\x7e]+", first.id)


def test_another_process_with_the_same_keys_accepts_the_id() -> None:
    now = [1000.0]
    session = sessions(now).open(INFO, "alice")
    elsewhere = sessions(now).get(session.id, "alice")  # no shared table: the id carries it all
    assert elsewhere.info == INFO and elsewhere.version == "2025-11-25"


@pytest.mark.parametrize("case", ["forged", "other key", "other principal", "expired",
                                  "request state"])
def test_a_bad_id_is_unknown(case: str) -> None:
    now = [1000.0]
    table = sessions(now)
    session_id = table.open(INFO, "alice").id
    principal = "alice"
    if case == "forged":
        session_id = session_id[:-4] + ("AAAA" if not session_id.endswith("AAAA") else "BBBB")
        table = sessions(now)
    elif case == "other key":
        table = sessions(now, key=bytes(32))
    elif case == "other principal":
        principal = "mallory"
    elif case == "expired":
        now[0] += 3601.0
    else:  # a requestState sealed with the same keys is not a session id
        sealer = Sealer(keys=[KEY], audience="app", clock=lambda: now[0])
        binding = Binding(method="initialize", target="mcp-session",
                          arguments_digest=digest_arguments({}), principal="alice")
        session_id = sealer.seal(INFO_BYTES, binding)
    with pytest.raises(UnknownSession):
        table.get(session_id, principal)


def test_an_ended_session_stays_unknown() -> None:
    table = sessions([1000.0])
    session = table.open(INFO, None)
    assert table.get(session.id, None) is session
    table.end(session)
    assert session.closed.is_set()
    with pytest.raises(UnknownSession):
        table.get(session.id, None)


def test_capabilities_follow_the_negotiated_version() -> None:
    caps = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}}
    assert session_capabilities("2025-11-25", caps) == caps
    assert session_capabilities("2025-06-18", caps) == {
        "elicitation": {"form": {}}, "sampling": {}, "roots": {}}
    assert session_capabilities("2025-03-26", caps) == {"sampling": {}, "roots": {}}
