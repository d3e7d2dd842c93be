"""A recorded round lets go of what its handler ran with before it waits for the store (#31).

Every round of a flow after the first records its outcome and waits a loop turn or more for the
store (the SQLite store's group commit). Whatever the request still holds meanwhile is alive
when the garbage collector's generation 0 runs, and with many rounds waiting that is most of
what each collection walks. The round's Context, its Round and the handler's own objects are
done by then: each case holds a weak reference to the handler's Context and checks, while the
store's write is held open and with the collector off (so only reference counting can have
freed it), that it is gone; then that the round still answers as before.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import msgspec
import pytest

from mrtr import Context, Form, Server
from mrtr.protocol import PROTOCOL_VERSION
from mrtr.server import Dispatcher, Peer
from mrtr.stores import Claim, MemoryStore
from mrtr.testing import ALL_CAPABILITIES

PEER = Peer(principal=None, transport="memory")


class Name(Form):
    name: str


class HeldStore(MemoryStore):
    """A MemoryStore whose put_if_absent waits until the test lets it write."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Claim:
        self.entered.set()
        await self.go.wait()
        return await super().put_if_absent(key, outcome, expires=expires)


def make_server(contexts: list[weakref.ref[Context]]) -> Server:
    app = Server("lifetime", version="1")

    @app.tool()
    async def greet(ctx: Context) -> str:
        contexts.append(weakref.ref(ctx))
        who = await ctx.elicit("Who?", Name, key="name")
        return f"hello {who.name}"

    @app.prompt()
    async def intro(ctx: Context) -> str:
        contexts.append(weakref.ref(ctx))
        who = await ctx.elicit("Who?", Name, key="name")
        return f"introduce {who.name}"

    @app.resource("mrtr://who")
    async def who(ctx: Context) -> str:
        contexts.append(weakref.ref(ctx))
        who = await ctx.elicit("Who?", Name, key="name")
        return f"who: {who.name}"

    return app


def request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    meta = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": ALL_CAPABILITIES}
    return msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "method": method,
                                "params": {**params, "_meta": meta}})


@pytest.mark.parametrize("method, params, text", [
    ("tools/call", {"name": "greet"}, "hello Ada"),
    ("prompts/get", {"name": "intro"}, "introduce Ada"),
    ("resources/read", {"uri": "mrtr://who"}, "who: Ada"),
])
def test_31_a_recorded_round_frees_its_context_before_the_store_writes(
    method: str, params: dict[str, Any], text: str,
) -> None:
    contexts: list[weakref.ref[Context]] = []

    async def go() -> dict[str, Any]:
        store = HeldStore()
        dispatcher = Dispatcher(make_server(contexts), store=store)
        first = await dispatcher.handle_bytes(request(1, method, params), PEER)
        assert first is not None
        state = msgspec.json.decode(first.body)["result"]["requestState"]
        second = asyncio.ensure_future(dispatcher.handle_bytes(request(2, method, {
            **params, "requestState": state,
            "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}}),
            PEER))
        await asyncio.wait_for(store.entered.wait(), 5)
        # Round 2's handler ran and returned; its outcome waits for the store.
        assert len(contexts) == 2
        assert contexts[1]() is None, "round 2's Context outlived its handler"
        store.go.set()
        reply = await second
        assert reply is not None
        return dict(msgspec.json.decode(reply.body))

    gc.disable()
    try:
        answered = asyncio.run(go())
    finally:
        gc.enable()
    result = answered["result"]
    found = (result["content"][0]["text"] if method == "tools/call"
             else result["messages"][0]["content"]["text"] if method == "prompts/get"
             else result["contents"][0]["text"])
    assert found == text
