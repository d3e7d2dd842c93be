"""A 2025 client's answers are bounded too (#26): over StoreLimits.max_answer, or over what its
principal may keep stored until the answer is collected, the call ends at once with the error
that names the limit, whichever process the answer reached; nothing large is stored."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from mrtr.server import Context, Dispatcher, Peer, Sealer, Server, SessionServer, StoreLimits
from mrtr.stores import MemoryStore, Store

KEY = b"b" * 32
app = Server("session-limits", version="1",
             limits=StoreLimits(max_answer=4096, anonymous_bytes=6000, principal_bytes=6000))


@app.tool()
async def pay(ctx: Context, amount: int) -> str:
    if not await ctx.confirm(f"Pay {amount}?", key="ok"):
        return "not paid"
    return f"paid {amount}"


def process(store: Store | None) -> SessionServer:
    """One worker or replica: its own Dispatcher and SessionServer, the shared key and store."""
    sealer = Sealer(keys=[KEY], audience="session-limits")
    return SessionServer(Dispatcher(app, sealer=sealer, store=store), ask_timeout=10)


def answer(note: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def make(request: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": request["id"], "result": {
            "action": "accept", "content": {"confirm": True}, "_meta": {"note": note}}}
    return make


async def call(stream: SessionServer, other: SessionServer, respond: Callable[..., Any],
               principal: str | None = None) -> tuple[dict[str, Any], float]:
    """tools/call `pay` on `stream`'s process, each answer POSTed to `other`'s: the reply and
    how long the call took."""
    peer = Peer(principal=principal, transport="test")
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "t", "version": "1"}}}
    session, _ = stream.initialize(initialize, peer)
    assert session is not None
    there = await other.sessions.get(session.id, principal)
    answered: list[asyncio.Task[Any]] = []

    async def outbound(message: bytes) -> None:
        request = json.loads(message)
        if "method" in request and "id" in request:
            answered.append(asyncio.create_task(other.serve(there, respond(request), peer,
                                                            outbound)))

    started = time.monotonic()
    body = await stream.serve(session, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                        "params": {"name": "pay", "arguments": {"amount": 3}}},
                              peer, outbound)
    await asyncio.gather(*answered)
    assert body is not None
    return json.loads(body), time.monotonic() - started


def test_26_a_2025_answer_over_max_answer_ends_the_call_with_the_limit_in_either_process() -> None:
    async def main() -> None:
        store = MemoryStore()
        one, two = process(store), process(store)
        for stream, other in ((one, one), (one, two)):  # resolved here, or through the store
            reply, took = await call(stream, other, answer("n" * 5000))
            error = reply["error"]
            assert error["code"] == -32602 and "StoreLimits.max_answer" in error["message"]
            assert "over the limit of 4,096 bytes" in error["message"]
            assert took < 5  # at once, not after the ask timeout (10 s)
        assert all(len(e.outcome or b"") < 1000 for e in store._entries.values())
        reply, _ = await call(one, two, answer("small"))
        assert reply["result"]["content"][0]["text"] == "paid 3"
    asyncio.run(asyncio.wait_for(main(), 30))


def test_26_answers_waiting_in_the_store_count_in_their_principal_quota_until_collected() -> None:
    async def main() -> None:
        store = MemoryStore()
        one, two = process(store), process(store)
        for principal in (None, "alice"):  # within max_answer, and collected: quota free again
            for _ in range(5):
                reply, _ = await call(one, two, answer("m" * 3000), principal)
                assert reply["result"]["content"][0]["text"] == "paid 3"
        assert await store.admitted("quota:anonymous") == 0
        assert await store.admitted("quota:principal:alice") == 0
        # Alice's quota taken by answers nobody collected: her next answer is not kept, the
        # call ends with the quota's error; anonymous callers are not affected.
        await store.admit("quota:principal:alice", "held", limit=6000, expires=time.time() + 60,
                          weight=5000)
        reply, took = await call(one, two, answer("m" * 3000), "alice")
        error = reply["error"]
        assert error["code"] == -32602 and "StoreLimits.principal_bytes" in error["message"]
        assert took < 5
        reply, _ = await call(one, two, answer("m" * 3000))
        assert reply["result"]["content"][0]["text"] == "paid 3"
    asyncio.run(asyncio.wait_for(main(), 30))
