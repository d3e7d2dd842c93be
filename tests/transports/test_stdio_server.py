"""serve_stdio: in-process with injected streams, and `mrtr serve --stdio` as a subprocess."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from mrtr.server import Dispatcher
from mrtr.transports import serve_stdio
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
