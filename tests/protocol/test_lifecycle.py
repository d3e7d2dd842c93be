"""The 2025 session types: version negotiation and the exact wire of the handshake."""

from __future__ import annotations

import pytest

import mrtr.protocol as p


@pytest.mark.parametrize("version", p.LEGACY_VERSIONS)
def test_a_version_we_speak_is_echoed(version: str) -> None:
    assert p.negotiate_version(version) == version


@pytest.mark.parametrize("requested", ["2026-07-28", "1999-01-01", "v999", "2024-11-05", None, 7])
def test_an_unknown_version_gets_our_newest(requested: object) -> None:
    assert p.negotiate_version(requested) == "2025-11-25"


def test_initialize_round_trips_without_a_result_type() -> None:
    body = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
            b'"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}}')
    request = p.decode(body, p.InitializeRequest)
    assert request.method == "initialize" and request.params.capabilities.elicitation == {}
    result = p.InitializeResult(protocol_version="2025-11-25", capabilities=p.ServerCapabilities(),
                                server_info=p.Implementation(name="s", version="1"))
    assert p.encode(result) == (b'{"protocolVersion":"2025-11-25","capabilities":{},'
                                b'"serverInfo":{"name":"s","version":"1"}}')


def test_server_request_envelope() -> None:
    params = p.ElicitationCreateParams(mode="url", message="m", url="https://x",
                                       elicitation_id="e1")
    message = p.JSONRPCRequest(id=3, method="elicitation/create",
                               params=p.decode(p.encode(params), dict))
    assert p.encode(message) == (b'{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":'
                                 b'{"mode":"url","message":"m","url":"https://x","elicitationId":"e1"}}')
