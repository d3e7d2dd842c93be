"""Peer and Principal: who calls, which scopes bind `scopes=` tools, what states bind to (#15)."""

from __future__ import annotations

import asyncio
import json

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from mrtr import Context, Server
from mrtr.server import Dispatcher, Peer, Principal

TEXT = st.text(max_size=12)
TRIPLE = st.tuples(TEXT, TEXT, st.none() | TEXT)


@given(TRIPLE, TRIPLE)
def test_15_distinct_triples_are_distinct_principals(a: tuple[str, str, str | None],
                                                     b: tuple[str, str, str | None]) -> None:
    assert (Principal(*a) == Principal(*b)) == (a == b)


@given(TRIPLE, st.frozensets(TEXT))
def test_15_principal_is_its_json_triple_and_scopes_stay_beside_it(
        triple: tuple[str, str, str | None], scopes: frozenset[str]) -> None:
    principal = Principal(*triple, scopes=scopes)
    assert json.loads(principal) == list(triple)
    assert principal == Principal(*triple)  # stepping up scopes keeps the same principal
    assert (principal.issuer, principal.subject, principal.client_id) == triple
    assert principal.scopes == scopes


def test_15_principal_repr_names_its_parts() -> None:
    assert repr(Principal("https://as", "ann", "cli", scopes=["b", "a"])) == (
        "Principal(issuer='https://as', subject='ann', client_id='cli', scopes=['a', 'b'])")


def test_15_peer_allows() -> None:
    assert Peer().allows(frozenset({"x"}))  # no authorization layer: every tool
    assert not Peer(scopes=frozenset()).allows(frozenset({"x"}))
    assert Peer(scopes=frozenset({"x", "y"})).allows(frozenset({"x"}))
    assert Peer(scopes=frozenset()).allows(frozenset())


app = Server("peers")
runs: list[str] = []


@app.tool(scopes=["admin", "write"])
async def purge(ctx: Context) -> str:
    runs.append("purge")
    return "purged"


def call(peer: Peer) -> dict[str, object]:
    dispatcher = Dispatcher(app)
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "purge", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}})
    reply = asyncio.run(dispatcher.handle_bytes(body, peer))
    assert reply is not None
    decoded: dict[str, object] = msgspec.json.decode(reply.body)
    decoded["status"] = reply.http_status
    return decoded


def test_15_runner_refuses_a_scoped_tool_before_it_runs() -> None:
    runs.clear()
    refused = call(Peer(principal="u", transport="http", scopes=frozenset({"write"})))
    assert refused["status"] == 403
    assert refused["error"] == {"code": -32600, "message": "Forbidden: insufficient scope",
                                "data": {"requiredScopes": ["admin", "write"]}}
    assert runs == []
    allowed = call(Peer(principal="u", transport="http", scopes=frozenset({"admin", "write"})))
    assert allowed["status"] == 200 and runs == ["purge"]
    assert call(Peer())["status"] == 200  # stdio and in-memory: no scopes to check


def test_15_registry_keeps_tool_scopes() -> None:
    assert app.tables.tools["purge"].scopes == frozenset({"admin", "write"})
    assert "scopes" not in msgspec.json.encode(app.tables.tools["purge"].tool).decode()
