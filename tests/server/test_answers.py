"""The answer channel (#13): a 2025 client's answer reaching another process than the stream's."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from mrtr.server import Context, Dispatcher, Peer, Sealer, Server, SessionServer
from mrtr.server.sessions._answers import answer_key
from mrtr.stores import MemoryStore, SQLiteStore, Store

PEER = Peer(principal=None, transport="test")
KEY = b"a" * 32
app = Server("answers", version="1")


@app.tool()
async def pay(ctx: Context, amount: int) -> str:
    if not await ctx.confirm(f"Pay {amount}?", key="ok"):
        return "not paid"
    return f"paid {amount}"


def process(store: Store | None, ask_timeout: float = 5.0) -> SessionServer:
    """One worker or replica: its own Dispatcher and SessionServer, the shared key and store."""
    sealer = Sealer(keys=[KEY], audience="answers")
    return SessionServer(Dispatcher(app, sealer=sealer, store=store), ask_timeout=ask_timeout)


async def call_with_the_answer_elsewhere(stream: SessionServer, other: SessionServer) -> str:
    """tools/call on `stream`'s process; the client's answer POSTed to `other`'s."""
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "t", "version": "1"}}}
    session, _ = stream.initialize(initialize, PEER)
    assert session is not None
    there = await other.sessions.get(session.id, None)  # the same session id, opened over there
    answered: list[asyncio.Task[Any]] = []

    async def outbound(message: bytes) -> None:
        request = json.loads(message)
        response = {"jsonrpc": "2.0", "id": request["id"],
                    "result": {"action": "accept", "content": {"confirm": True}}}
        answered.append(asyncio.create_task(other.serve(there, response, PEER, outbound)))

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "pay", "arguments": {"amount": 3}}}
    body = await stream.serve(session, call, PEER, outbound)
    await asyncio.gather(*answered)
    assert body is not None and answered
    text: str = json.loads(body)["result"]["content"][0]["text"]
    return text


def test_13_an_answer_posted_to_another_process_reaches_the_waiting_one(tmp_path: Path) -> None:
    async def main() -> list[str]:
        memory = MemoryStore()
        texts = [await call_with_the_answer_elsewhere(process(memory), process(memory))]
        sqlite_a, sqlite_b = SQLiteStore(tmp_path / "s.db"), SQLiteStore(tmp_path / "s.db")
        try:  # two stores on one file: two processes' connections
            texts.append(await call_with_the_answer_elsewhere(process(sqlite_a),
                                                              process(sqlite_b)))
        finally:
            await sqlite_a.aclose()
            await sqlite_b.aclose()
        return texts

    assert asyncio.run(asyncio.wait_for(main(), 20)) == ["paid 3", "paid 3"]


def test_13_without_a_store_an_answer_elsewhere_is_logged_and_the_ask_times_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> str:
        return await call_with_the_answer_elsewhere(process(None, 0.3), process(None, 0.3))

    with caplog.at_level(logging.INFO, logger="mrtr.server.session"):
        text = asyncio.run(asyncio.wait_for(main(), 10))
    assert text == "The client did not answer the elicitation/create request within 0.3 seconds."
    assert "ignored a response to unknown server request id" in caplog.text


def test_13_answer_keys_name_the_session_and_the_typed_request_id() -> None:
    assert answer_key("s1", 7) != answer_key("s1", "7") != answer_key("s2", 7)
    assert answer_key("s1", 7).startswith("answer:") and "s1" not in answer_key("s1", 7)


def test_13_server_request_ids_differ_between_processes_serving_one_session() -> None:
    stream, other = process(None), process(None)
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}}}
    session, _ = stream.initialize(initialize, PEER)
    assert session is not None
    there = asyncio.run(other.sessions.get(session.id, None))
    here_id, there_id = session._new_id(5.0), there._new_id(5.0)
    assert here_id.split(".")[0] != there_id.split(".")[0]
    # Each process tells its own ids from the other's: only those may be awaited elsewhere.
    assert session.origin(here_id) == "here" and session.origin(there_id) == "elsewhere"
    assert there.origin(there_id) == "here" and there.origin(here_id) == "elsewhere"
