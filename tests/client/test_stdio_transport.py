"""The stdio client transport against a scripted subprocess server."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from mrtr.client import Client, Handlers, TransportError
from mrtr.client.transports._stdio import TAIL, ServerExited, StdioTransport
from mrtr.protocol import CallToolResult, ElicitRequestParams, ElicitResult, TextContent

MOCK = [sys.executable, str(Path(__file__).with_name("stdio_mock.py"))]


def first_text(result: CallToolResult) -> str:
    assert isinstance(result.content[0], TextContent)
    return result.content[0].text


async def answer(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"answer": "42"})


def test_concurrent_requests_progress_mrtr_and_cancel() -> None:
    async def go() -> None:
        async with Client(StdioTransport(MOCK), handlers=Handlers(elicitation=answer)) as client:
            seen: list[float] = []
            slow = asyncio.create_task(client.call_tool(
                "sleep", {"seconds": 0.3}, progress=lambda p, t, m: seen.append(p)))
            fast = asyncio.create_task(client.call_tool("sleep", {"seconds": 0.01}))
            done, _ = await asyncio.wait({slow, fast}, return_when=asyncio.FIRST_COMPLETED)
            assert done == {fast}
            assert first_text(await slow) == "slept 0.3"
            assert seen == [1]
            assert first_text(await client.call_tool("ask")) == "42"
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(client.call_tool("sleep", {"seconds": 30}), 0.2)
            cancelled = json.loads(first_text(await client.call_tool("cancelled")))
            assert len(cancelled) == 1

    asyncio.run(go())


def test_server_exit_fails_pending_requests() -> None:
    async def go() -> None:
        async with Client(StdioTransport(MOCK)) as client:
            with pytest.raises(TransportError, match="exited"):
                await client.call_tool("exit")
            with pytest.raises(TransportError):
                await client.call_tool("sleep", {"seconds": 0})

    asyncio.run(go())


def test_shutdown_kills_a_server_that_ignores_eof() -> None:
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    transport = StdioTransport([sys.executable, "-c", script], shutdown_timeout=0.2)

    async def go() -> int | None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(transport.request(
                b'{"jsonrpc":"2.0","id":1,"method":"x"}', request_id=1, headers={},
                notify=lambda m: None), 0.2)
        await transport.aclose()
        assert transport._proc is not None
        return transport._proc.returncode

    assert asyncio.run(go()) == -9


@pytest.mark.parametrize("early", [True, False])
def test_a_server_that_exits_carries_the_end_of_its_stderr_issue19(early: bool) -> None:
    # early: it exits before the first request is written; else while the request waits.
    code = ("import sys, time\n" + ("" if early else "sys.stdin.readline()\n")
            + "sys.stderr.write('a\\n' * 30 + 'Traceback\\nNameError: x')\nsys.exit(4)")

    async def go() -> ServerExited:
        transport = StdioTransport([sys.executable, "-c", code], stderr=TAIL)
        if early:
            await transport._ensure_started()
            await asyncio.sleep(1.0)
        try:
            async with Client(transport, timeout=20) as client:
                await client.list_tools()
        except ServerExited as exc:
            return exc
        raise AssertionError("no ServerExited")

    exc = asyncio.run(go())
    assert exc.code == 4 and len(exc.stderr_tail) == 20
    assert exc.stderr_tail[-2:] == ("Traceback", "NameError: x")
    assert str(exc).startswith("the server exited with code 4; the end of its stderr:\na\n")
    assert isinstance(exc, TransportError)
