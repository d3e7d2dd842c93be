"""`mrtr call --mode legacy` under a terminal (pexpect) against our own server over real HTTP:
the whole `book_return` flow of examples/bookings.py in a 2025 session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pexpect  # type: ignore[import-untyped]
import pytest

from examples import bookings
from mrtr.http import McpApp
from mrtr.server import Dispatcher
from tests.transports.conftest import LiveServer, free_port

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = "import sys; from mrtr.cli import main; sys.exit(main())"

pytestmark = pytest.mark.slow


class Recorder:
    """ASGI middleware: remember (method, session id sent?, MCP-Protocol-Version) per POST."""

    def __init__(self, app: McpApp) -> None:
        self.app = app
        self.seen: list[tuple[str, bool, str | None]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            event = await receive()
            chunks.append(event.get("body", b""))
            more = event.get("more_body", False)
        body = b"".join(chunks)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        message = msgspec.json.decode(body)
        self.seen.append((message.get("method", "<response>"), "mcp-session-id" in headers,
                          headers.get("mcp-protocol-version")))
        replayed = False

        async def again() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                event: dict[str, Any] = await receive()
                return event
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, again, send)


@pytest.fixture()
def recorded() -> Iterator[tuple[str, Recorder]]:
    port = free_port()
    recorder = Recorder(McpApp(Dispatcher(bookings.app)))
    with LiveServer(recorder, port) as server:  # type: ignore[arg-type]
        yield f"{server.url}/mcp", recorder


def test_mrtr_call_mode_legacy_books_a_return_over_http_issue12(
    recorded: tuple[str, Recorder],
) -> None:
    url, recorder = recorded
    before = len(bookings.carrier.bookings)
    child = pexpect.spawn(sys.executable, ["-c", LAUNCH, "call", "--mode", "legacy", url,
                                           "book_return", "order_id=A-1001"],
                          cwd=str(ROOT), encoding="utf-8", timeout=20,
                          env={**os.environ, "TERM": "dumb"})  # the plain line forms
    child.expect("asks: Return details for order A-1001")
    child.expect(r"reason \(choice\): ")
    child.sendline("1")
    child.expect(r"email \(string, email\): ")
    child.sendline("ann@example.com")
    child.expect(r"boxes \(integer, 1 to 5\): ")
    child.sendline("9")  # over the maximum: asked again
    child.expect("must be at most 5")
    child.expect(r"boxes \(integer, 1 to 5\): ")
    child.sendline("2")
    child.expect(r"pickup_date \(string, date\): ")
    child.sendline("2026-08-03")
    child.expect(r"Send\? \[Y/n\] ")
    child.sendline("y")
    child.expect(r"asks: Book a pickup on 2026-08-03 for 2 boxes\?")
    child.expect(r"confirm \(y/n\): ")
    child.sendline("y")
    child.expect(r"Return RMA-\d{4} booked: pickup on 2026-08-03, label sent to ann@example\.com\.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert bookings.carrier.bookings[before:] == [("A-1001", 2)]  # booked exactly once
    methods = [method for method, _, _ in recorder.seen]
    assert methods[:2] == ["initialize", "notifications/initialized"]
    assert "server/discover" not in methods  # --mode legacy never probes
    later = recorder.seen[1:]
    assert all(sent and version == "2025-11-25" for _, sent, version in later), later
    assert methods.count("tools/call") == 1  # the asks were pushed, never re-sent calls
    assert methods.count("<response>") == 2  # the form and the confirmation, answered by POST
