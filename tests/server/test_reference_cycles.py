"""A refused request leaves no reference cycle behind (issue 31).

A raised error's traceback holds the frames it passed through, and a frame its locals: the
request's body or arguments. When something those frames hold refers back to the error, the
two form a cycle that only the garbage collector frees, so a client sending large refused
requests makes the process hold them until the next collection (`mrtr serve --gc-threshold`
makes collections rarer: docs/deploy.md#garbage-collection). Each case counts what a full
collection finds after five such requests, the collector off meanwhile: nothing.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Awaitable, Callable

import pytest

from benchmarks.server import app  # greet asks for a name (key "name"), then greets
from mrtr.errors import ProtocolError
from mrtr.protocol import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION,
    PROTOCOL_VERSION_KEY,
    decode_client_message,
)
from mrtr.server import Dispatcher, Peer

META = {PROTOCOL_VERSION_KEY: PROTOCOL_VERSION, CLIENT_INFO_KEY: {"name": "t", "version": "1"},
        CLIENT_CAPABILITIES_KEY: {"elicitation": {"form": {}}}}
BLOB = "x" * 100_000


def found_after(step: Callable[[], Awaitable[object]]) -> int:
    """Objects a full collection finds unreachable after five runs of `step` (one run first,
    so that caches filled on first use do not count)."""
    async def measure() -> int:
        await step()
        gc.collect()
        gc.disable()
        try:
            for _ in range(5):
                await step()
            return gc.collect()
        finally:
            gc.enable()

    return asyncio.run(measure())


def test_31_a_body_refused_by_the_decoder_is_freed_without_the_collector() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": 5, "params": {"blob": BLOB}})

    async def refused() -> None:
        with pytest.raises(ProtocolError):
            decode_client_message(body.encode())

    assert found_after(refused) == 0


def test_31_a_request_answered_with_a_raised_error_is_freed_without_the_collector() -> None:
    dispatcher = Dispatcher(app)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "no-such-tool", "arguments": {"blob": BLOB}, "_meta": META}}).encode()

    async def unknown_tool() -> None:
        reply = await dispatcher.handle_bytes(body, Peer())
        assert reply is not None and reply.error is not None and reply.error.code == -32602

    assert found_after(unknown_tool) == 0


def test_31_the_rounds_of_a_flow_leave_nothing_for_the_collector() -> None:
    # The usual path: round 1 suspends on an ask (an exception), round 2 unseals and answers.
    dispatcher = Dispatcher(app)

    def call(**params: object) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "greet", "arguments": {"greeting": "hi"}, "_meta": META, **params}}).encode()

    async def flow() -> None:
        first = await dispatcher.handle_bytes(call(), Peer())
        assert first is not None and first.result is not None
        state = json.loads(first.body)["result"]["requestState"]
        answers = {"name": {"action": "accept", "content": {"name": BLOB}}}
        done = await dispatcher.handle_bytes(
            call(requestState=state, inputResponses=answers), Peer())
        assert done is not None and json.loads(done.body)["result"]["content"][0]["text"] == (
            f"hi, {BLOB}")

    assert found_after(flow) == 0
