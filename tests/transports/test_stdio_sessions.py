"""`mrtr serve --stdio` speaking the 2025 wire (#12): raw JSON-RPC lines, written by hand."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import msgspec

from mrtr.server import Dispatcher
from mrtr.stdio import serve_stdio
from tests.transports import apps
from tests.transports.conftest import ROOT, cli_env, request, run
from tests.transports.test_stdio_server import Lines, line, read_message

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
    "clientInfo": {"name": "hand-written", "version": "0"}}}


class Peer:
    """The client end of a `mrtr serve --stdio` subprocess."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line(message))
        await self.process.stdin.drain()

    async def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        return await read_message(self.process.stdout)


async def spawn() -> Peer:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mrtr.cli", "serve", "tests.transports.apps:app", "--stdio",
        cwd=ROOT, env=cli_env(), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    return Peer(process)


async def finish(peer: Peer) -> bytes:
    assert peer.process.stdin is not None and peer.process.stderr is not None
    peer.process.stdin.close()
    await asyncio.wait_for(peer.process.wait(), 10)
    return await peer.process.stderr.read()


def test_a_probe_then_initialize_then_pushed_asks_over_a_subprocess() -> None:
    async def go() -> tuple[list[dict[str, Any]], bytes]:
        peer = await spawn()
        seen: list[dict[str, Any]] = []
        # Claude Code's order: a bare server/discover probe first; its failure locks nothing.
        await peer.send({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}})
        seen.append(await peer.receive())
        await peer.send(INITIALIZE)
        seen.append(await peer.receive())
        await peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "greet", "arguments": {}}})
        first = await peer.receive()
        await peer.send({"jsonrpc": "2.0", "id": 777, "result": {"action": "accept"}})  # unknown
        await peer.send({"jsonrpc": "2.0", "id": first["id"],
                         "result": {"action": "accept", "content": {"name": "Ada"}}})
        second = await peer.receive()
        await peer.send({"jsonrpc": "2.0", "id": second["id"],
                         "result": {"action": "accept", "content": {"color": "teal"}}})
        seen += [first, second, await peer.receive()]
        # 2026-07-28 `_meta` on the same stream is still served statelessly.
        await peer.send(request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}},
                                id=3))
        seen.append(await peer.receive())
        return seen, await finish(peer)

    seen, stderr = run(go(), timeout=30)
    probe, init, first, second, final, modern = seen
    assert probe["id"] == 0 and "error" in probe
    assert init["result"]["protocolVersion"] == "2025-11-25"
    assert init["result"]["serverInfo"]["name"] == "transport-tests"
    assert first["method"] == second["method"] == "elicitation/create"
    assert first["params"]["message"] == "Your name?"
    assert final == {"jsonrpc": "2.0", "id": 2,
                     "result": {"content": [{"type": "text", "text": "Hello Ada, you like teal"}]}}
    assert modern["result"]["resultType"] == "complete"
    assert b"server request id 777, which this session never issued" in stderr


def test_a_modern_discover_does_not_lock_the_era_in_process() -> None:
    async def go() -> Lines:
        reader = asyncio.StreamReader()
        out = Lines()
        serving = asyncio.create_task(serve_stdio(Dispatcher(apps.app), reader=reader,
                                                  writer=out))
        reader.feed_data(line(request("server/discover", id=0)))
        reader.feed_data(line(INITIALIZE))
        reader.feed_data(line({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        reader.feed_eof()
        await serving
        return out

    messages = sorted(run(go()).messages, key=lambda m: m["id"])  # requests run concurrently
    assert messages[0]["result"]["supportedVersions"] == ["2026-07-28"]
    assert messages[1]["result"]["protocolVersion"] == "2025-11-25"
    assert messages[2] == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_session_methods_before_initialize_stay_unknown() -> None:
    async def go() -> Lines:
        reader = asyncio.StreamReader()
        out = Lines()
        reader.feed_data(line({"jsonrpc": "2.0", "id": 5, "method": "ping"}))
        reader.feed_eof()
        await serve_stdio(Dispatcher(apps.app), reader=reader, writer=out)
        return out

    (reply,) = run(go()).messages
    assert reply["id"] == 5 and reply["error"]["code"] == -32601


def test_an_unanswered_ask_times_out_in_process() -> None:
    async def go() -> Lines:
        reader = asyncio.StreamReader()
        out = Lines()
        reader.feed_data(line(INITIALIZE))
        reader.feed_data(line({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                               "params": {"name": "greet", "arguments": {}}}))
        reader.feed_eof()
        await serve_stdio(Dispatcher(apps.app), reader=reader, writer=out, ask_timeout=0.05)
        return out

    init, ask, final = run(go()).messages
    assert ask["method"] == "elicitation/create"
    assert final["id"] == 2 and final["result"]["isError"] is True
    assert "did not answer" in msgspec.json.encode(final).decode()


def test_a_2025_03_26_session_accepts_batches() -> None:
    async def go() -> Lines:
        reader = asyncio.StreamReader()
        out = Lines()
        old = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "2025-03-26"}}
        reader.feed_data(line(old))
        batch = [{"jsonrpc": "2.0", "id": 2, "method": "ping"},
                 {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}]
        reader.feed_data(msgspec.json.encode(batch) + b"\n")
        reader.feed_eof()
        await serve_stdio(Dispatcher(apps.app), reader=reader, writer=out)
        return out

    init, *rest = run(go()).messages
    assert init["result"]["protocolVersion"] == "2025-03-26"
    replies = {m["id"]: m for m in rest}
    assert replies[2]["result"] == {} and "tools" in replies[3]["result"]
    assert len(rest) == 2


def test_ask_timeout_option_ends_an_unanswered_pushed_ask_over_stdio_issue12() -> None:
    async def go() -> tuple[dict[str, Any], dict[str, Any], float]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mrtr.cli", "serve", "tests.transports.apps:app", "--stdio",
            "--ask-timeout", "0.5", cwd=ROOT, env=cli_env(), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        peer = Peer(process)
        await peer.send(INITIALIZE)
        await peer.receive()
        await peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "greet", "arguments": {}}})
        ask = await peer.receive()
        started = asyncio.get_running_loop().time()
        final = await peer.receive()  # never answered: the option's 0.5 s, not 600 s
        waited = asyncio.get_running_loop().time() - started
        await finish(peer)
        return ask, final, waited

    ask, final, waited = run(go(), timeout=30)
    assert ask["method"] == "elicitation/create"
    assert final["id"] == 2 and final["result"]["isError"] is True
    (text,) = [block["text"] for block in final["result"]["content"]]
    assert "did not answer" in text and "0.5 seconds" in text
    assert waited < 10
