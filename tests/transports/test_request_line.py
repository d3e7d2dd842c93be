"""`mrtr serve --log-format json` writes one `mrtr.requests` line per round of a flow, over HTTP
and stdio, for 2026-07-28 clients and 2025 (`initialize`) sessions alike (#27)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mrtr.client import Client, Handlers, Mode, Transport
from mrtr.client.transports._http import HTTPTransport
from mrtr.client.transports._stdio import StdioTransport
from mrtr.protocol import UNSET, LoggingMessageNotificationParams
from tests.transports.conftest import ROOT, cli_env, free_port, spawn_cli, stop, wait_ready
from tests.transports.logged_app import answer_booking

pytestmark = pytest.mark.slow
SERVE = ("serve", "tests.transports.logged_app:app", "--log-format", "json", "--store", "none")


def book(transport: Transport, mode: Mode) -> tuple[str, list[LoggingMessageNotificationParams]]:
    """Book A-1 (three rounds) with a Client that asks for log messages at info."""
    seen: list[LoggingMessageNotificationParams] = []
    client = Client(transport, handlers=Handlers(elicitation=answer_booking), mode=mode, timeout=30,
                    on_log=seen.append)

    async def go() -> str:
        async with client:
            result = await client.call_tool("book", {"order_id": "A-1"})
        return "".join(getattr(block, "text", "") for block in result.content)

    return asyncio.run(go()), seen


def request_lines(log: Path) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [e for e in entries if e["logger"] == "mrtr.requests"]


def check_rounds(lines: list[dict[str, Any]], mode: str) -> None:
    calls = [e for e in lines if e["method"] == "tools/call"]
    assert [(e["round"], e["outcome"]) for e in calls] == [
        (1, "input_required"), (2, "input_required"), (3, "complete")], calls
    assert len({e["flow_id"] for e in calls}) == 1 and len(calls[0]["flow_id"]) >= 12
    assert {e["target"] for e in calls} == {"book"}
    assert all(e["level"] == "info" and e["duration_ms"] >= 0 for e in calls)
    assert all("principal" not in e for e in calls)  # anonymous: no digest to write
    ids = [e["request_id"] for e in calls]
    # 2026-07-28: each round is a request of its own; 2025: one request, its asks pushed.
    assert len(set(ids)) == (3 if mode == "modern" else 1), ids
    if mode == "legacy":
        assert {"initialize", "logging/setLevel"} <= {e["method"] for e in lines}


def check_client_saw_each_log_once(seen: list[LoggingMessageNotificationParams]) -> None:
    assert [(p.level, p.data, p.logger) for p in seen] == [
        ("info", "booking A-1", "carrier"), ("warning", "the carrier is late today", UNSET)]


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_one_json_line_per_round_over_http_issue27(tmp_path: Path, mode: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log = tmp_path / "stderr.log"
    with log.open("wb") as sink:
        process = spawn_cli(*SERVE, "--port", str(port), stdout=subprocess.DEVNULL, stderr=sink)
    try:
        wait_ready(url, process)
        text, seen = book(HTTPTransport(url), mode)
    finally:
        stop(process)
    assert text == "Booked A-1: 2 box(es)."
    check_rounds(request_lines(log), mode)
    check_client_saw_each_log_once(seen)


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_one_json_line_per_round_over_stdio_issue27(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "stderr.log"
    with log.open("wb") as sink:
        transport = StdioTransport([sys.executable, "-m", "mrtr.cli", *SERVE, "--stdio"],
                                   env=cli_env(), cwd=str(ROOT), stderr=sink.fileno())
        text, seen = book(transport, mode)
    assert text == "Booked A-1: 2 box(es)."
    check_rounds(request_lines(log), mode)
    check_client_saw_each_log_once(seen)


def test_the_text_format_at_debug_shows_the_line_and_masks_the_bug_issue27(
        tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log = tmp_path / "stderr.log"
    with log.open("wb") as sink:
        process = spawn_cli("serve", "tests.transports.logged_app:app", "--port", str(port),
                            "--log-level", "debug", stdout=subprocess.DEVNULL, stderr=sink)
    try:
        wait_ready(url, process)

        async def go() -> str:
            async with Client(HTTPTransport(url), mode="modern", timeout=30) as client:
                result = await client.call_tool("boom")
            assert result.is_error is True
            return "".join(getattr(block, "text", "") for block in result.content)

        assert asyncio.run(go()) == "Tool boom failed."  # production: masked
    finally:
        stop(process)
    lines = log.read_text().splitlines()
    line = next(x for x in lines if x.startswith("INFO mrtr.requests: tools/call"))
    assert re.fullmatch(r"INFO mrtr\.requests: tools/call boom: complete, isError "
                        r"\(\d+\.\d ms\) \[request=\d+ flow=- round=1 principal=-\]", line), line
    assert any("ZeroDivisionError" in x for x in lines)  # the reason, in the log only
