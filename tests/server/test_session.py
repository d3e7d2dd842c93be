"""Session ids (#12): sealed, validated without a table, bound to the principal, expiring.

The table of one process (#26): capped per client and in all, never evicting a busy session or
another client's; terminations recorded in the store, seen by every process and after restarts.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest

from mrtr.errors import StoreUnavailable, TooManySessions
from mrtr.server import Binding, Sealer, SessionLimits
from mrtr.server._sealing import digest_arguments
from mrtr.server.sessions._session import SessionInfo, UnknownSession, session_capabilities
from mrtr.server.sessions._table import Sessions, tenant_of
from mrtr.stores import MemoryStore, RedisStore, SQLiteStore, Store
from tests.stores.conftest import REDIS_SERVER

KEY = bytes(range(32))
INFO = SessionInfo(version="2025-11-25", capabilities={"sampling": {}},
                   client_info={"name": "c", "version": "1"})
INFO_BYTES = msgspec.msgpack.encode(INFO)
T = TypeVar("T")


def run(awaitable: Awaitable[T]) -> T:
    async def main() -> T:
        return await awaitable

    return asyncio.run(main())


def sessions(now: list[float], key: bytes = KEY, *, store: Store | None = None,
             limits: SessionLimits | None = None) -> Sessions:
    sealer = Sealer(keys=[key], audience="app", clock=lambda: now[0])
    return Sessions(sealer.for_audience("app mcp-session", ttl=3600.0), ttl=3600.0, store=store,
                    limits=limits, clock=lambda: now[0])


def test_an_id_is_visible_ascii_and_unique() -> None:
    table = sessions([time.time()])
    first, second = table.open(INFO, None), table.open(INFO, None)
    assert first.id != second.id
    assert re.fullmatch(r"[\x21-\x7e]+", first.id)


def test_another_process_with_the_same_keys_accepts_the_id() -> None:
    now = [time.time()]
    session = sessions(now).open(INFO, "alice")
    elsewhere = run(sessions(now).get(session.id, "alice"))  # no shared table: the id has it all
    assert elsewhere.info == session.info and elsewhere.version == "2025-11-25"
    assert elsewhere.info.client_info == INFO.client_info and len(elsewhere.info.secret) == 16
    assert elsewhere.tenant == session.tenant == tenant_of("alice", None)


@pytest.mark.parametrize("case", ["forged", "other key", "other principal", "expired",
                                  "request state"])
def test_a_bad_id_is_unknown(case: str) -> None:
    now = [time.time()]
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
        run(table.get(session_id, principal))


def test_an_ended_session_stays_unknown() -> None:
    table = sessions([time.time()])
    session = table.open(INFO, None)
    assert run(table.get(session.id, None)) is session
    run(table.end(session))
    assert session.closed.is_set()
    with pytest.raises(UnknownSession):
        run(table.get(session.id, None))


def test_capabilities_follow_the_negotiated_version() -> None:
    caps = {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}}
    assert session_capabilities("2025-11-25", caps) == caps
    assert session_capabilities("2025-06-18", caps) == {
        "elicitation": {"form": {}}, "sampling": {}, "roots": {}}
    assert session_capabilities("2025-03-26", caps) == {"sampling": {}, "roots": {}}


# -- terminations every process sees (#26) -----------------------------------------------------
def test_26_a_termination_reaches_every_process_and_a_restart(tmp_path: Path) -> None:
    async def main() -> list[str]:
        now = [time.time()]
        seen = []
        for kind in ("memory", "sqlite"):
            if kind == "memory":
                shared = MemoryStore()
                one = two = three = shared
            else:  # three connections to one file: three processes
                one, two, three = (SQLiteStore(tmp_path / "s.db") for _ in range(3))
            a, b = sessions(now, store=one), sessions(now, store=two)
            session = a.open(INFO, "ann")
            there = await b.get(session.id, "ann")  # live in both processes
            await b.end(there)  # DELETE reached the other worker
            for table in (a, b, sessions(now, store=three)):  # the third: a restart
                with pytest.raises(UnknownSession):
                    await table.get(session.id, "ann")
            assert session.closed.is_set()  # its streams close here too
            seen.append(kind)
            for store in {one, two, three}:
                await store.aclose()
        return seen

    assert run(main()) == ["memory", "sqlite"]


async def open_and_end_others(table: Sessions, count: int) -> None:
    """`count` sessions of 200 other anonymous clients, opened and ended, 100 at a time."""
    for start in range(0, count, 100):
        opened = [table.open(INFO, None, address=f"10.0.{n % 200 // 100}.{n % 100}")
                  for n in range(start, start + 100)]
        await asyncio.gather(*(table.end(session) for session in opened))


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_26_a_termination_outlives_20000_others(backend: str, tmp_path: Path) -> None:
    # Before #26 a process remembered the last 10,000 terminations only: the 10,001st brought
    # the first id back to life. The store now keeps each until the id expires.
    if backend == "redis" and REDIS_SERVER is None:
        pytest.skip("redis-server is not installed")

    async def main(store: Store) -> None:
        now = [time.time()]
        table = sessions(now, store=store)
        victim = table.open(INFO, None)
        await table.end(victim)
        await open_and_end_others(table, 20_000)
        for process in (table, sessions(now, store=store)):
            for _ in range(50):
                with pytest.raises(UnknownSession):
                    await process.get(victim.id, None)
        await store.aclose()

    if backend == "memory":
        run(main(MemoryStore()))
        return
    from tests.stores.conftest import start_redis, stop_redis

    redis, url = start_redis(tmp_path)
    try:
        run(main(RedisStore(url)))
    finally:
        stop_redis(redis)


def test_26_a_client_that_ended_too_many_sessions_is_refused_and_the_session_goes_on() -> None:
    now = [time.time()]
    table = sessions(now, store=MemoryStore(), limits=SessionLimits(ended_per_client=2))
    for _ in range(2):
        run(table.end(table.open(INFO, "ann")))
    kept = table.open(INFO, "ann")
    with pytest.raises(TooManySessions) as refused:
        run(table.end(kept))
    assert refused.value.scope == "ended" and refused.value.limit == 2
    assert "2" in refused.value.message and refused.value.http_status == 429
    assert run(table.get(kept.id, "ann")) is kept and not kept.closed.is_set()
    run(table.end(table.open(INFO, "bob")))  # another client's own count


class Call:
    """Stands for a request's task in `Session.inflight` (a call in flight)."""

    cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class DownStore(MemoryStore):
    async def get(self, key: str) -> Any:
        raise StoreUnavailable("down")


def test_26_a_store_that_cannot_answer_refuses_the_request_rather_than_guess() -> None:
    now = [time.time()]
    session = sessions(now).open(INFO, None)
    with pytest.raises(StoreUnavailable):
        run(sessions(now, store=DownStore()).get(session.id, None))


# -- the table's caps (#26) --------------------------------------------------------------------
def test_26_a_client_at_its_cap_is_refused_and_another_client_is_untouched() -> None:
    now = [time.time()]
    table = sessions(now, limits=SessionLimits(per_client=3, total=100))
    victim = table.open(INFO, None, address="10.0.0.2")
    victim.inflight[7] = call = Call()  # type: ignore[assignment]
    flood = [table.open(INFO, None, address="10.0.0.1") for _ in range(3)]
    for _ in range(1000):
        with pytest.raises(TooManySessions) as refused:
            table.open(INFO, None, address="10.0.0.1")
    assert refused.value.scope == "client" and refused.value.limit == 3
    assert "3 sessions" in refused.value.message and refused.value.retry_after == 600.0
    assert run(table.get(victim.id, None)) is victim and not victim.closed.is_set()
    assert not call.cancelled
    assert all(run(table.get(s.id, None)) is s for s in flood)
    assert table.open(INFO, "ann", address="10.0.0.1")  # an authenticated client is its own


def test_26_idle_sessions_of_the_same_client_make_room_least_recently_used_first() -> None:
    now = [time.time()]
    table = sessions(now, limits=SessionLimits(per_client=3, idle=600.0))
    first, second, third = (table.open(INFO, "ann") for _ in range(3))
    now[0] += 300.0
    with pytest.raises(TooManySessions) as refused:
        table.open(INFO, "ann")
    assert refused.value.retry_after == 300.0  # when the oldest is idle long enough
    now[0] += 300.0
    assert run(table.get(first.id, "ann")) is first  # used again: last in line
    fourth = table.open(INFO, "ann")
    assert [s.id for s in table.live()] == [third.id, first.id, fourth.id]  # second dropped
    again = run(table.get(second.id, "ann"))  # its id still works: it opens afresh
    assert again is not second and again.initialized and not second.closed.is_set()


def test_26_a_session_with_a_call_in_flight_or_a_stream_is_never_evicted() -> None:
    now = [time.time()]
    table = sessions(now, limits=SessionLimits(per_client=2, idle=1.0))
    calling, listening = table.open(INFO, None), table.open(INFO, None)
    calling.inflight[1] = Call()  # type: ignore[assignment]
    listening.streams.append(lambda message: asyncio.sleep(0))  # type: ignore[arg-type,misc]
    now[0] += 10_000.0
    with pytest.raises(TooManySessions):
        table.open(INFO, None)
    assert {s.id for s in table.live()} == {calling.id, listening.id}
    calling.inflight.clear()
    assert table.open(INFO, None)  # now idle: it made room


def test_26_a_full_process_refuses_rather_than_take_another_clients_session() -> None:
    now = [time.time()]
    table = sessions(now, limits=SessionLimits(per_client=10, total=2, idle=600.0))
    ann, bob = table.open(INFO, "ann"), table.open(INFO, "bob")
    with pytest.raises(TooManySessions) as refused:
        table.open(INFO, "carol")
    assert refused.value.scope == "server" and refused.value.limit == 2
    assert {s.id for s in table.live()} == {ann.id, bob.id}
    now[0] += 600.0  # both idle for `idle`: the least recently used makes room
    table.open(INFO, "carol")
    assert {s.id for s in table.live()} - {ann.id, bob.id} and bob.id in {
        s.id for s in table.live()}


def test_26_ids_new_to_a_process_count_against_the_client_that_opened_them() -> None:
    now = [time.time()]
    opener = sessions(now)
    ids = [opener.open(INFO, None, address="10.0.0.1").id for _ in range(2)]
    other = sessions(now, limits=SessionLimits(per_client=1))
    run(other.get(ids[0], None, address="10.9.9.9"))  # sealed tenant: 10.0.0.1's
    with pytest.raises(TooManySessions):
        run(other.get(ids[1], None, address="10.9.9.8"))
    assert other.open(INFO, None, address="10.9.9.9")  # the caller's own address has room


def test_26_clients_are_principals_or_addresses_ipv6_by_64() -> None:
    assert tenant_of("ann", "10.0.0.1") == tenant_of("ann", "10.0.0.2") != tenant_of("bob", None)
    assert tenant_of(None, "10.0.0.1") != tenant_of(None, "10.0.0.2")
    assert tenant_of(None, "2001:db8::1") == tenant_of(None, "2001:db8::ffff:1")
    assert tenant_of(None, "2001:db8::1") != tenant_of(None, "2001:db8:0:1::1")
    assert tenant_of(None, "::ffff:10.0.0.1") == tenant_of(None, "10.0.0.1")
    assert tenant_of(None, None) != tenant_of(None, "10.0.0.1") != tenant_of("10.0.0.1", None)
    with pytest.raises(ValueError, match="per_client"):
        SessionLimits(per_client=0)


# -- server request ids (#26) ------------------------------------------------------------------
def test_26_only_ids_this_session_issued_and_whose_ask_is_not_over_are_its_own() -> None:
    now = [time.time()]
    table = sessions(now)
    session, other = table.open(INFO, None), table.open(INFO, None)
    issued = session._new_id(60.0)
    elsewhere = run(sessions(now).get(session.id, None))._new_id(60.0)
    assert session.origin(issued) == "here" and session.origin(elsewhere) == "elsewhere"
    number, expiry, tag = issued.split(".")
    forged = [4242, "s-1", None, True, 1.5, [issued], {"id": issued}, issued + "x",
              f"{number}.{int(expiry) + 9999}.{tag}", f"{int(number) + 1}.{expiry}.{tag}",
              f"{number}.{expiry}.{tag[:-1]}A" if tag[-1] != "A" else f"{number}.{expiry}.x",
              other._new_id(60.0), "1" * 50 + "." + "2" * 20 + "." + tag, "١.٢." + tag]
    assert [session.origin(value) for value in forged] == [None] * len(forged)
    now[0] += 60.0 + 31.0  # the ask is over (and the clock skew allowed for)
    assert session.origin(issued) is None
