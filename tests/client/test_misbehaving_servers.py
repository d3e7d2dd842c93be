"""The client against real misbehaving servers: every call ends, with a clear error (#11 9-10)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest

from mrtr.client import Client, ClientLimits, ListTooLong, Transport, TransportError
from mrtr.client.transports._http import HTTPTransport
from mrtr.client.transports._stdio import StdioTransport

from .rogue import Rogue, serve

T = TypeVar("T")
GUARD = 20.0  # seconds; a test that needs it has found a hang


@pytest.fixture(scope="module")
def rogue() -> Iterator[str]:
    yield from serve(Rogue())


def modern(transport: Transport, **options: Any) -> Client:
    """These servers misbehave at 2026-07-28 requests: no era probe, each test sees its own."""
    return Client(transport, mode="modern", **options)


def run(work: Awaitable[T]) -> T:
    async def guarded() -> T:
        return await asyncio.wait_for(work, GUARD)

    return asyncio.run(guarded())


async def list_then_call(client: Client) -> None:
    async with client:
        await client.call_tool("add", {})


def test_the_default_client_has_a_deadline() -> None:
    client = Client(StdioTransport(["true"]))
    assert client.timeout == 300.0
    assert client.limits == ClientLimits(max_pages=100, max_items=10_000,
                                         max_round_inputs=16, max_flow_inputs=64)


@pytest.mark.parametrize("path", ["/keepalive", "/keepalive-call"])
def test_deadline_covers_sse_keepalives_forever(rogue: str, path: str) -> None:
    # /keepalive hangs the tools/list the client sends before its first tools/call.
    client = modern(HTTPTransport(rogue + path), timeout=0.5)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"no result within the 0.5 s deadline"):
        run(list_then_call(client))
    assert time.monotonic() - started < 5


def test_deadline_covers_list_and_discover(rogue: str) -> None:
    async def go(method: str) -> None:
        async with modern(HTTPTransport(rogue + "/keepalive"), timeout=0.3) as client:
            await getattr(client, method)()

    for method in ("list_tools", "list_prompts", "discover"):
        with pytest.raises(TimeoutError, match="deadline"):
            run(go(method))


def test_manual_steps_have_the_deadline(rogue: str) -> None:
    async def go() -> None:
        async with modern(HTTPTransport(rogue + "/keepalive-call"), timeout=0.3) as client:
            await client.start_tool_call("add", {}).step()

    with pytest.raises(TimeoutError, match="deadline"):
        run(go())


@pytest.mark.parametrize(("options", "limit"), [({}, "max_body=16777216"),
                                                ({"max_body": 100_000}, "max_body=100000")])
def test_endless_json_body_is_cut(rogue: str, options: dict[str, int], limit: str) -> None:
    client = modern(HTTPTransport(rogue + "/endless-body", **options))
    with pytest.raises(TransportError, match=limit):
        run(list_then_call(client))


@pytest.mark.parametrize(("options", "limit"), [({}, "max_event=16777216"),
                                                ({"max_event": 100_000}, "max_event=100000")])
def test_endless_sse_event_is_cut(rogue: str, options: dict[str, int], limit: str) -> None:
    client = modern(HTTPTransport(rogue + "/endless-event", **options))
    with pytest.raises(TransportError, match=limit):
        run(list_then_call(client))


def test_endless_cursor_chain_before_the_first_call() -> None:
    app = Rogue()
    for url in serve(app):
        client = modern(HTTPTransport(url + "/cursor"))
        with pytest.raises(ListTooLong, match=r"tools/list: still a nextCursor after 100 pages"):
            run(list_then_call(client))
        assert app.requests == {"tools/list": 100}


def test_endless_cursor_chain_with_configured_limits() -> None:
    app = Rogue()
    for url in serve(app):
        limits = ClientLimits(max_pages=1000, max_items=5)
        client = modern(HTTPTransport(url + "/cursor"), limits=limits)
        with pytest.raises(ListTooLong, match=r"6 pages and 6 items .*max_items=5"):
            run(list_then_call(client))
        assert app.requests == {"tools/list": 6}


SILENT = "import sys\nfor line in sys.stdin: pass\n"  # reads every request, answers none
DEAF = "import time\ntime.sleep(60)\n"  # never reads stdin at all


@pytest.mark.parametrize("method", ["call_tool", "list_tools"])
def test_stdio_server_that_never_answers(method: str) -> None:
    async def go() -> None:
        transport = StdioTransport([sys.executable, "-c", SILENT], shutdown_timeout=0.5)
        async with modern(transport, timeout=0.5) as client:
            if method == "call_tool":
                await client.call_tool("add", {})
            else:
                await client.list_tools()

    with pytest.raises(TimeoutError, match="deadline"):
        run(go())


def test_stdio_server_that_never_reads() -> None:
    # 4 MB of arguments fill the pipe: the write blocks, the deadline cancels it, and the
    # cancellation notice must not block on the same full pipe.
    async def go() -> None:
        transport = StdioTransport([sys.executable, "-c", DEAF], shutdown_timeout=0.5)
        async with modern(transport, timeout=0.5) as client:
            await client.call_tool("add", {"blob": "x" * 4_000_000})

    with pytest.raises(TimeoutError, match="deadline"):
        run(go())
