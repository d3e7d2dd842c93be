"""The client's idempotency keys (#25): sent when the server declares them, one per logical call,
the same on every round and on every retry the client makes of that call."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx
import pytest

from mrtr.client import Client, ClientLimits, Handlers
from mrtr.client.transports import HTTPTransport
from mrtr.errors import IdempotencyKeyInProgress, TransportError
from mrtr.protocol import ElicitRequestParams, ElicitResult, TextContent

from .mocks import VERSION, JSONDict, MockServer, Reply, client_for, fail, ok

T = TypeVar("T")
TOOLS = [{"name": "pay", "inputSchema": {"type": "object"}}]
ASK = {"method": "elicitation/create", "params": {
    "message": "Sure?", "requestedSchema": {
        "type": "object", "properties": {"confirmed": {"type": "boolean"}}}}}


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 20))


async def accept(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"confirmed": True})


def server(declared: bool, calls: Any = None) -> MockServer:
    """Answers discover (declaring `tools.idempotency` or not), tools/list, and tools/call
    through `calls(request, n)` (n: the 1-based count of tools/call requests so far)."""
    count = [0]

    def handle(request: JSONDict, headers: dict[str, str]) -> Reply:
        method = request["method"]
        if method == "server/discover":
            tools = {"idempotency": {}} if declared else {}
            return ok(request, {"supportedVersions": [VERSION], "capabilities": {"tools": tools},
                                "ttlMs": 0, "cacheScope": "public"})
        if method == "tools/list":
            return ok(request, {"tools": TOOLS, "ttlMs": 60_000})
        count[0] += 1
        if calls is not None:
            reply: Reply = calls(request, count[0])
            return reply
        return ok(request, {"content": [{"type": "text", "text": f"done {count[0]}"}]})

    return MockServer(handle)


class Broken:
    """In front of `app`: the tools/call POSTs numbered in `fail` get an HTTP 502 in text/plain
    (a proxy's answer, not MCP: the client transport raises TransportError)."""

    def __init__(self, app: MockServer, fail: set[int]) -> None:
        self.app, self.fail, self.calls = app, fail, 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        chunks = []
        while True:
            event = await receive()
            chunks.append(event.get("body", b""))
            if not event.get("more_body"):
                break
        body = b"".join(chunks)
        if b'"tools/call"' in body:
            self.calls += 1
            if self.calls in self.fail:
                self.app.seen.append(({}, json.loads(body)))
                await send({"type": "http.response.start", "status": 502,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"bad gateway"})
                return

        async def replay() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def broken_client(app: MockServer, fail: set[int], **options: Any) -> Client:
    front = Broken(app, fail)
    transport = HTTPTransport("http://mock/mcp", transport=httpx.ASGITransport(app=front))
    return Client(transport, mode="auto", **options)


def keys(app: MockServer) -> list[object]:
    return [body["params"].get("idempotencyKey") for body in app.bodies("tools/call")]


def test_25_a_fresh_key_per_call_only_when_the_server_declares_it() -> None:
    for declared in (True, False):
        app = server(declared)

        async def go(app: MockServer) -> None:
            async with client_for(app, mode="auto") as client:
                await client.call_tool("pay", {})
                await client.call_tool("pay", {})

        run(go(app))
        sent = keys(app)
        if declared:
            assert all(isinstance(k, str) and uuid.UUID(k).version == 4 for k in sent)
            assert sent[0] != sent[1]
        else:
            assert sent == [None, None]
        # Learning it cost nothing: the one discover is the era probe an auto Client sends.
        assert len(app.bodies("server/discover")) == 1


def test_25_the_era_probe_before_another_first_request_teaches_it_too() -> None:
    app = server(True)

    async def go() -> None:
        async with client_for(app, mode="auto") as client:
            await client.list_tools()  # the first request: the era probe goes out before it
            await client.call_tool("pay", {})

    run(go())
    assert isinstance(keys(app)[0], str)
    assert len(app.bodies("server/discover")) == 1


def test_25_a_modern_client_learns_it_from_discover_and_sends_no_request_to_find_out() -> None:
    app = server(True)

    async def go() -> None:
        async with client_for(app) as client:  # mode="modern": no probe
            await client.call_tool("pay", {})
            await client.discover()
            await client.call_tool("pay", {})

    run(go())
    assert keys(app)[0] is None and isinstance(keys(app)[1], str)
    assert len(app.bodies("server/discover")) == 1


def test_25_the_key_is_the_same_on_every_mrtr_round() -> None:
    def calls(request: JSONDict, n: int) -> Reply:
        if n < 3:
            return ok(request, {"resultType": "input_required", "requestState": f"s{n}",
                                "inputRequests": {f"q{n}": ASK}})
        return ok(request, {"content": [{"type": "text", "text": "paid"}]})

    app = server(True, calls)

    async def go() -> None:
        async with client_for(app, Handlers(elicitation=accept), mode="auto") as client:
            result = await client.call_tool("pay", {"amount": 5})
            assert result.content == [TextContent(text="paid")]

    run(go())
    sent = keys(app)
    assert len(sent) == 3 and len(set(sent)) == 1 and sent[0] is not None
    ids = [b["id"] for b in app.bodies("tools/call")]
    assert len(set(ids)) == 3


def test_25_the_key_is_kept_across_version_and_header_retries() -> None:
    def calls(request: JSONDict, n: int) -> Reply:
        if n == 1:
            return fail(request, -32020, "header mismatch")
        if n == 3:
            return fail(request, -32022, "unsupported", {"supported": [VERSION],
                                                          "requested": VERSION})
        return ok(request, {"content": []})

    app = server(True, calls)

    async def go() -> None:
        async with client_for(app, mode="auto") as client:
            await client.call_tool("pay", {})  # -32020: tools listed again, then resent
            await client.call_tool("pay", {})  # -32022: resent with a supported version

    run(go())
    first, first_retry, second, second_retry = keys(app)
    assert first == first_retry and second == second_retry and first != second
    assert len({b["id"] for b in app.bodies("tools/call")}) == 4


def test_25_in_progress_and_pending_are_waited_out_with_the_same_key_and_new_ids() -> None:
    def calls(request: JSONDict, n: int) -> Reply:
        if n == 1:
            return fail(request, -32603, "busy", {"type": "idempotency_key_in_progress",
                                                  "retryAfter": 0.05}, status=409)
        if n == 2:  # the first call's outcome is on its way to the store
            return fail(request, -32603, "Outcome pending", {"type": "outcome_pending",
                                                             "retryAfter": 0.05}, status=503)
        return ok(request, {"content": [{"type": "text", "text": "paid"}]})

    app = server(True, calls)

    async def go() -> float:
        async with client_for(app, mode="auto") as client:
            started = asyncio.get_running_loop().time()
            result = await client.call_tool("pay", {})
            assert result.content == [TextContent(text="paid")]
            return asyncio.get_running_loop().time() - started

    took = run(go())
    assert len(set(keys(app))) == 1 and len(keys(app)) == 3
    assert len({b["id"] for b in app.bodies("tools/call")}) == 3
    assert took >= 0.1  # it waited retryAfter each time


def test_25_in_progress_retries_are_bounded() -> None:
    app = server(True, lambda r, n: fail(r, -32603, "busy", {
        "type": "idempotency_key_in_progress", "retryAfter": 0.01}, status=409))

    async def go() -> None:
        async with client_for(app, mode="auto",
                              limits=ClientLimits(max_busy_retries=2)) as client:
            await client.call_tool("pay", {})

    with pytest.raises(IdempotencyKeyInProgress):
        run(go())
    assert len(keys(app)) == 3


def test_25_a_transport_failure_is_retried_with_the_same_key_only_when_declared() -> None:
    for declared in (True, False):
        app = server(declared)

        async def go(app: MockServer) -> None:
            async with broken_client(app, {1}) as client:
                await client.call_tool("pay", {}, idempotency_key="order-7")

        if declared:
            run(go(app))
            assert keys(app) == ["order-7", "order-7"]
        else:
            with pytest.raises(TransportError):  # no key the server honours: never resent
                run(go(app))
            assert keys(app) == ["order-7"]


def test_25_transport_retries_are_bounded() -> None:
    app = server(True)

    async def go() -> None:
        async with broken_client(app, {1, 2, 3},
                                 limits=ClientLimits(max_transport_retries=1)) as client:
            await client.call_tool("pay", {})

    with pytest.raises(TransportError):
        run(go())
    assert len(keys(app)) == 2 and len(set(keys(app))) == 1


def test_25_a_callers_key_is_sent_as_given_and_a_malformed_one_refused() -> None:
    app = server(False)

    async def go() -> None:
        async with client_for(app) as client:
            await client.call_tool("pay", {}, idempotency_key="invoice-42")
            for bad in ("", "has space", "x" * 256):
                with pytest.raises(ValueError, match="visible ASCII"):
                    await client.call_tool("pay", {}, idempotency_key=bad)
                with pytest.raises(ValueError, match="visible ASCII"):
                    client.start_tool_call("pay", {}, idempotency_key=bad)

    run(go())
    assert keys(app) == ["invoice-42"]


def test_25_a_stepped_call_keeps_its_key_through_a_checkpoint() -> None:
    def calls(request: JSONDict, n: int) -> Reply:
        if n == 1:
            return ok(request, {"resultType": "input_required", "requestState": "s1",
                                "inputRequests": {"q": ASK}})
        return ok(request, {"content": []})

    app = server(True, calls)

    async def go() -> None:
        async with client_for(app, mode="auto") as client:
            await client.discover()
            flow = client.start_tool_call("pay", {})
            await flow.step()
            saved = flow.checkpoint()
        async with client_for(app, mode="auto") as other:
            resumed = other.resume(saved)
            await resumed.answer({"q": ElicitResult(action="accept",
                                                    content={"confirmed": True})})
            assert resumed.done

    run(go())
    first, second = keys(app)
    assert first == second and isinstance(first, str)


def test_25_an_in_process_server_with_a_store_dedupes_the_clients_own_retry() -> None:
    from mrtr import Server
    from mrtr.server import Dispatcher
    from mrtr.stores import MemoryStore

    app, charges = Server("shop"), []

    @app.tool()
    async def charge(amount: int) -> str:
        charges.append(amount)
        await asyncio.sleep(0.3)
        return f"charged {amount} #{len(charges)}"

    async def go() -> list[str]:
        store = MemoryStore()
        async with Client(Dispatcher(app, store=store), timeout=0.1) as client:
            with pytest.raises(TimeoutError):
                await client.call_tool("charge", {"amount": 5}, idempotency_key="pay-1")
            client.timeout = 5
            again = await client.call_tool("charge", {"amount": 5}, idempotency_key="pay-1")
            fresh = await client.call_tool("charge", {"amount": 5})
        return [str(c.text) for c in (*again.content, *fresh.content)]  # type: ignore[union-attr]

    assert run(go()) == ["charged 5 #1", "charged 5 #2"]
    assert charges == [5, 5]
