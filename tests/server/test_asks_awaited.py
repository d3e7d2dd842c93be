"""Asks cannot be skipped (#26): a missing `await` raises or is reported, never runs unasked.

`if ctx.confirm("Delete every booking?"):` without `await` used to take the yes branch with no
question sent (an Ask object was truthy). Each test here drives the handler through a real
round (the Dispatcher's bytes in, bytes out, or the RoundEngine) or through TestClient.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mrtr import Context, Server
from mrtr.protocol import PROTOCOL_VERSION, UNSET, RequestMeta
from mrtr.server import Dispatcher, InputRequired, Peer, Sealer
from mrtr.server._rounds import RoundEngine
from mrtr.server._sealing import Binding, digest_arguments
from mrtr.testing import ALL_CAPABILITIES, TestClient

HINT = "did you forget `await`?"
app = Server("asks-26", version="1.0.0")
deleted: list[str] = []


@pytest.fixture(autouse=True)
def _nothing_deleted_yet() -> None:
    deleted.clear()


@app.tool()
async def wipe(ctx: Context) -> str:
    if ctx.confirm("Delete every booking?"):  # the bug of #26: no `await`
        deleted.append("every booking")
        return "Deleted every booking."
    return "Kept them."


@app.tool()
async def wipe_awaited(ctx: Context) -> str:
    if await ctx.confirm("Delete every booking?"):
        deleted.append("every booking")
        return "Deleted every booking."
    return "Kept them."


@app.tool()
async def wipe_gathered(ctx: Context) -> str:
    if ctx.gather(ctx.confirm("Delete bookings?"), ctx.confirm("Delete invoices?")):
        deleted.append("everything")
    return "done"


@app.tool()
async def wipe_dropped(ctx: Context) -> str:
    ctx.confirm("Delete every booking?")  # made, never awaited: nobody was asked
    deleted.append("every booking")
    return "Deleted every booking."


@app.tool()
def wipe_sync(ctx: Context) -> str:  # a `def` handler cannot await
    if ctx.confirm("Delete every booking?"):
        deleted.append("every booking")
    return "Deleted every booking."


@app.tool()
async def both_later(ctx: Context) -> str:
    # Made first, awaited in a later round: not dropped (the check runs only when it returns).
    first, second = ctx.confirm("First?", key="a"), ctx.confirm("Second?", key="b")
    return f"{await second} {await first}"


@app.tool()
async def guard(ctx: Context) -> Any:
    # Guard style sends its Asks as they are, without awaiting them: not dropped.
    if not ctx.input_responses:
        return InputRequired(asks={"ok": ctx.confirm("Sure?", key="ok")})
    return "answered"


META = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": ALL_CAPABILITIES,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"}}


def call(dispatcher: Dispatcher, name: str) -> dict[str, Any]:
    """One tools/call through the Dispatcher, bytes in and bytes out."""
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                "params": {"name": name, "arguments": {}, "_meta": META}})
    reply = asyncio.run(dispatcher.handle_bytes(body, Peer(transport="memory")))
    assert reply is not None
    return msgspec.json.decode(reply.body)["result"]  # type: ignore[no-any-return]


# -- an un-awaited ask used as a boolean ---------------------------------------------------------

def test_26_an_unawaited_confirm_in_an_if_raises_in_a_real_round(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="mrtr.server"):
        result = call(Dispatcher(app), "wipe")
    assert deleted == []  # the destructive branch did not run
    assert result["isError"] is True and "inputRequests" not in result
    assert result["content"][0]["text"] == "Tool wipe failed."  # a server bug: fixed text
    [record] = [r for r in caplog.records if r.exc_info]
    error = record.exc_info[1] if record.exc_info else None
    assert isinstance(error, TypeError) and HINT in str(error)
    assert "ctx.confirm('Delete every booking?')" in str(error)
    assert "`if await ctx.confirm('Delete every booking?'):`" in str(error)


def test_26_an_unawaited_confirm_in_an_if_raises_in_testclient(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="mrtr.server"), TestClient(app) as client:
        flow = client.call_tool("wipe")
    assert deleted == [] and flow.rounds == 1
    assert flow.result["isError"] is True
    assert HINT in caplog.text


def test_26_the_awaited_confirm_asks_and_obeys_the_answer() -> None:
    with TestClient(app) as client:
        assert client.call_tool("wipe_awaited", answers={"confirm-1": False}).text == "Kept them."
        assert deleted == []
        flow = client.call_tool("wipe_awaited", answers={"confirm-1": True})
    assert flow.text == "Deleted every booking." and flow.rounds == 2
    assert deleted == ["every booking"]


def test_26_an_unawaited_gather_in_an_if_raises(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="mrtr.server"):
        result = call(Dispatcher(app), "wipe_gathered")
    assert deleted == [] and result["isError"] is True
    assert HINT in caplog.text and "ctx.gather(...)" in caplog.text


# -- an ask made and dropped ---------------------------------------------------------------------

def test_26_a_dropped_ask_is_a_warning_in_the_server_log(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mrtr.server"):
        result = call(Dispatcher(app), "wipe_dropped")
    assert result["content"][0]["text"] == "Deleted every booking."  # the server keeps serving
    [record] = [r for r in caplog.records if HINT in r.getMessage()]
    assert record.levelno == logging.WARNING and record.name == "mrtr.server"
    assert "ctx.confirm('Delete every booking?') (key 'confirm-1')" in record.getMessage()


def test_26_a_dropped_ask_fails_testclient() -> None:
    with TestClient(app) as client, pytest.raises(AssertionError) as failed:
        client.call_tool("wipe_dropped")
    assert HINT in str(failed.value)
    assert "ctx.confirm('Delete every booking?') (key 'confirm-1')" in str(failed.value)
    with TestClient(app) as client:  # the next request of the same client is judged afresh
        with pytest.raises(AssertionError):
            client.call_tool("wipe_dropped")
        assert client.call_tool("wipe_awaited", answers={"confirm-1": False}).rounds == 2


def test_26_the_round_engine_reports_each_dropped_ask_once() -> None:
    seen: list[str] = []
    engine = RoundEngine(Sealer(keys=[b"e" * 32], audience="a"), on_unawaited=seen.append)
    binding = Binding(method="tools/call", target="t", arguments_digest=digest_arguments({}),
                      principal=None)
    round_ = engine.open(UNSET, lambda: binding)
    no_roots = {**META, "io.modelcontextprotocol/clientCapabilities": {}}  # the fallback answers
    meta = msgspec.convert(no_roots, RequestMeta)
    ctx = round_.context(request_id=1, meta=meta, peer=Peer(), input_responses={})

    async def handler(ctx: Context) -> str:
        ctx.confirm("One?", key="one")
        ctx.sample("Two?", max_tokens=5)
        await ctx.gather(ctx.roots(fallback=[]))  # gathered: awaited
        return "done"

    assert asyncio.run(round_.run(handler, ctx)) == "done"
    [message] = seen
    assert "ctx.confirm('One?') (key 'one'); ctx.sample(...) (key 'sample-2')" in message
    assert "roots" not in message and HINT in message


@pytest.mark.parametrize("tool", ["both_later", "guard"])
def test_26_asks_awaited_in_a_later_round_or_sent_guard_style_are_not_dropped(
        tool: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mrtr.server"), TestClient(app) as client:
        flow = client.call_tool(tool, answers={"a": True, "b": False, "ok": True})
    assert flow.text in ("False True", "answered")
    assert HINT not in caplog.text


# -- a sync handler ------------------------------------------------------------------------------

def test_26_a_sync_handler_calling_an_ask_is_told_to_be_async(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="mrtr.server"):
        result = call(Dispatcher(app), "wipe_sync")
    assert deleted == [] and result["isError"] is True
    [record] = [r for r in caplog.records if r.exc_info]
    error = record.exc_info[1] if record.exc_info else None
    assert isinstance(error, TypeError)
    assert str(error).startswith("ctx.confirm('Delete every booking?') in a sync handler")
    assert "make the handler `async def`" in str(error)


def test_26_a_sync_handler_without_asks_still_runs_in_a_thread() -> None:
    server = Server("sync-26")

    @server.tool()
    def ping(ctx: Context) -> str:
        return f"pong {ctx.round}"

    with TestClient(server) as client:
        assert client.call_tool("ping").text == "pong 1"


# -- mypy sees both mistakes with two optional error codes (docs/server.md) ----------------------

MISTAKES = '''\
from mrtr import Context, Server

app = Server("t")


@app.tool()
async def wipe(ctx: Context) -> str:
    if ctx.confirm("Delete every booking?"):
        return "deleted"
    ctx.confirm("Really?")
    return "kept"
'''


def test_26_mypy_flags_an_ask_in_an_if_and_a_dropped_ask(tmp_path: Path) -> None:
    # Ask.__bool__ is hidden from type checkers: a visible one would silence truthy-bool.
    (tmp_path / "wipe.py").write_text(MISTAKES)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "--enable-error-code", "truthy-bool", "--enable-error-code", "unused-awaitable",
         "wipe.py"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    assert ('wipe.py:8: error: "confirm" returns "Ask[bool]" which does not implement __bool__ '
            "or __len__ so it could always be true in boolean context  [truthy-bool]") in out.stdout
    assert ('wipe.py:10: error: Value of type "Ask[bool]" must be used  [unused-awaitable]'
            in out.stdout)
    assert "Found 2 errors in 1 file" in out.stdout
