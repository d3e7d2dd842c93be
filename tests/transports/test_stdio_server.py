"""serve_stdio: in-process with injected streams, and `mrtr serve --stdio` as a subprocess."""

from __future__ import annotations

import asyncio
import json
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from mrtr.server import Dispatcher
from mrtr.stdio import serve_stdio
from tests.transports import apps
from tests.transports.conftest import ROOT, call, cli_env, request, run


def line(message: dict[str, Any]) -> bytes:
    return msgspec.json.encode(message) + b"\n"


def cancel(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "test"}}


class Lines:
    """A ByteWriter collecting what the server writes, one parsed message per line."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.arrived = asyncio.Event()

    def write(self, data: bytes) -> None:
        self.data += data
        self.arrived.set()

    async def drain(self) -> None:
        return None

    @property
    def messages(self) -> list[dict[str, Any]]:
        assert self.data.endswith(b"\n") or not self.data
        return [json.loads(raw) for raw in self.data.splitlines()]


async def serve_lines(*messages: bytes, grace: float = 5.0) -> Lines:
    reader = asyncio.StreamReader()
    for data in messages:
        reader.feed_data(data)
    reader.feed_eof()
    out = Lines()
    await serve_stdio(Dispatcher(apps.app), reader=reader, writer=out, grace=grace)
    return out


# -- in-process ---------------------------------------------------------------------------------

def test_requests_run_concurrently() -> None:
    out = run(serve_lines(line(call("slow", {"seconds": 0.3}, id=1)), line(call("fast", id=2))))
    assert [m["id"] for m in out.messages] == [2, 1]


def test_cancelled_request_gets_no_reply() -> None:
    async def go() -> Lines:
        reader = asyncio.StreamReader()
        out = Lines()
        server = asyncio.create_task(
            serve_stdio(Dispatcher(apps.app), reader=reader, writer=out))
        reader.feed_data(line(call("slow", {"seconds": 0.5}, id=1)))
        await asyncio.sleep(0.05)
        reader.feed_data(line(cancel(1)) + line(call("fast", id=2)))
        await asyncio.sleep(0.7)
        reader.feed_eof()
        await server
        return out

    assert [m["id"] for m in run(go()).messages] == [2]


def test_a_duplicate_in_flight_id_is_rejected_issue_20() -> None:
    out = run(serve_lines(line(call("slow", {"seconds": 0.3}, id=7)), line(call("fast", id=7))))
    first, second = out.messages
    assert (first["id"], first["error"]["code"]) == (7, -32600)
    assert "already in flight" in first["error"]["message"]
    assert (second["id"], second["result"]["content"][0]["text"]) == (7, "slept 0.3")


def test_an_id_may_be_reused_once_answered() -> None:
    async def go() -> Lines:
        reader = asyncio.StreamReader()
        out = Lines()
        server = asyncio.create_task(
            serve_stdio(Dispatcher(apps.app), reader=reader, writer=out))
        for _ in range(2):
            out.arrived.clear()
            reader.feed_data(line(call("fast", id=7)))
            await out.arrived.wait()
            await asyncio.sleep(0.01)  # let the finished task be forgotten
        reader.feed_eof()
        await server
        return out

    assert [("result" in m, m["id"]) for m in run(go()).messages] == [(True, 7), (True, 7)]


def test_invalid_lines_get_error_replies() -> None:
    out = run(serve_lines(b"{nope\n", b"[]\n", line(request("unknown/method", id=4))))
    codes = [(m.get("id"), m["error"]["code"]) for m in out.messages]
    assert codes == [(None, -32700), (None, -32600), (4, -32601)]


def test_progress_goes_out_as_lines_before_the_reply() -> None:
    out = run(serve_lines(line(call("count", {"steps": 3}, id=1,
                                    extra_meta={"progressToken": "p"}))))
    methods = [m.get("method") for m in out.messages]
    assert methods == ["notifications/progress"] * 3 + [None]


def test_eof_cancels_stragglers_after_the_grace_period(tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    started = time.monotonic()
    out = run(serve_lines(line(call("hang", {"marker": str(marker)}, id=1)), grace=0.2))
    assert time.monotonic() - started < 3
    assert marker.read_text() == "cancelled"
    assert all("id" not in m for m in out.messages)


def test_notifications_without_id_are_ignored() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert run(serve_lines(line(note))).messages == []


# -- a real subprocess --------------------------------------------------------------------------

async def read_message(stdout: asyncio.StreamReader, timeout: float = 10.0) -> dict[str, Any]:
    data = await asyncio.wait_for(stdout.readline(), timeout)
    assert data.endswith(b"\n"), data
    message: dict[str, Any] = json.loads(data)
    return message


def test_subprocess_concurrency_cancellation_and_eof() -> None:
    async def go() -> tuple[list[Any], int | None, bytes]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mrtr.cli", "serve", "tests.transports.apps:app", "--stdio",
            cwd=ROOT, env=cli_env(), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert process.stdin and process.stdout and process.stderr
        try:
            ids: list[Any] = []
            process.stdin.write(line(call("slow", {"seconds": 1.0}, id="slow")))
            process.stdin.write(line(call("fast", id="fast")))
            await process.stdin.drain()
            ids += [(await read_message(process.stdout))["id"] for _ in range(2)]
            process.stdin.write(line(call("slow", {"seconds": 0.8}, id=3)))
            await process.stdin.drain()
            await asyncio.sleep(0.2)
            process.stdin.write(line(cancel(3)) + line(call("fast", id=4)))
            await process.stdin.drain()
            ids.append((await read_message(process.stdout))["id"])
            await asyncio.sleep(1.0)  # the cancelled one would have answered by now
            process.stdin.close()
            rest = await asyncio.wait_for(process.stdout.read(), 10)
            code = await asyncio.wait_for(process.wait(), 10)
            return [*ids, rest], code, await process.stderr.read()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()

    ids, code, stderr = run(go(), timeout=40)
    assert ids == ["fast", "slow", 4, b""], stderr.decode()
    assert code == 0


# -- every request gets a reply (#11) -----------------------------------------------------------

UNSENDABLE = '''
from mrtr import Server
from mrtr.protocol import PromptMessage, TextContent

app = Server("unsendable-stdio")


@app.prompt()
async def complex_text() -> PromptMessage:
    return PromptMessage(role="user", content=TextContent(text=1j))


@app.resource("mem://surrogate")
async def surrogate() -> str:
    return "\\ud800"


@app.tool()
async def fast() -> str:
    return "fast"
'''
INTERNAL_ERROR = {"code": -32603, "message": "Internal error"}


def unsendable_requests() -> list[bytes]:
    return [line(request("prompts/get", {"name": "complex_text"}, id=1)),
            line(request("resources/read", {"uri": "mem://surrogate"}, id=2)),
            line(call("fast", id=3))]


def test_a_reply_json_cannot_carry_is_an_internal_error_issue_11(tmp_path: Path) -> None:
    source = tmp_path / "unsendable_stdio.py"
    source.write_text(UNSENDABLE)
    namespace = runpy.run_path(str(source))

    async def go() -> Lines:
        reader = asyncio.StreamReader()
        reader.feed_data(b"".join(unsendable_requests()))
        reader.feed_eof()
        out = Lines()
        await serve_stdio(Dispatcher(namespace["app"]), reader=reader, writer=out)
        return out

    replies = {m["id"]: m for m in run(go()).messages}
    assert replies[1]["error"] == replies[2]["error"] == INTERNAL_ERROR
    assert replies[3]["result"]["content"][0]["text"] == "fast"


def test_a_dispatcher_that_raises_still_answers_issue_11() -> None:
    class Broken(Dispatcher):
        async def handle(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a bug in a dispatcher")

    async def go() -> Lines:
        reader = asyncio.StreamReader()
        reader.feed_data(line(call("fast", id=5)))
        reader.feed_eof()
        out = Lines()
        await serve_stdio(Broken(apps.app), reader=reader, writer=out)
        return out

    assert run(go()).messages == [{"jsonrpc": "2.0", "id": 5, "error": INTERNAL_ERROR}]


def test_subprocess_answers_a_reply_json_cannot_carry_issue_11(tmp_path: Path) -> None:
    server = tmp_path / "unsendable_stdio.py"
    server.write_text(UNSENDABLE)

    async def go() -> list[dict[str, Any]]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mrtr.cli", "serve", f"{server}:app", "--stdio",
            cwd=ROOT, env=cli_env(), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert process.stdin and process.stdout
        try:
            process.stdin.write(b"".join(unsendable_requests()))
            await process.stdin.drain()
            return [await read_message(process.stdout) for _ in range(3)]
        finally:
            process.kill()
            await process.wait()

    replies = {m["id"]: m for m in run(go(), timeout=40)}
    assert replies[1]["error"] == replies[2]["error"] == INTERNAL_ERROR
    assert replies[3]["result"]["content"][0]["text"] == "fast"
