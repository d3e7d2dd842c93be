"""Our client meets our server in both eras: `book_return` of examples/bookings.py over real
HTTP (`mrtr serve`) and stdio (`mrtr serve --stdio`), in a 2025 session and in 2026-07-28."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import msgspec
import pytest

from mrtr.client import Client, Handlers, MessageSink
from mrtr.client.transports._http import HTTPTransport
from mrtr.client.transports._stdio import StdioTransport
from mrtr.protocol import ElicitRequestParams, ElicitResult, RequestId, TextContent
from tests.client.rogue import free_port
from tests.client.test_examples_e2e import HANDLERS, SCENARIOS, run_flow

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
SERVE = [sys.executable, "-m", "mrtr", "serve", "examples.bookings:app"]
DETAILS = {"reason": "broken", "email": "ann@example.com", "pickup_date": "2026-08-03"}
# RMA numbers count the carrier's bookings in this fresh server process: RMA-0001 in the
# final text means `ctx.once` booked exactly once, however many times the handler re-ran.
BOOKED = "Return RMA-0001 booked: pickup on 2026-08-03, label sent to ann@example.com."

pytestmark = pytest.mark.slow


class Answers:
    """Answer the form with 9 boxes first (over the limit of 5), then 2; confirm yes."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.message)
        if params.message.startswith("Book a pickup"):
            return ElicitResult(action="accept", content={"confirm": True})
        boxes = 9 if len(self.asked) == 1 else 2
        return ElicitResult(action="accept", content={**DETAILS, "boxes": boxes})


class Recording(HTTPTransport):
    """An HTTPTransport that remembers the method of every request it sends."""

    methods: list[str]

    async def request(self, message: bytes, *, request_id: RequestId,
                      headers: Mapping[str, str], notify: MessageSink) -> bytes:
        self.methods = [*getattr(self, "methods", []), msgspec.json.decode(message)["method"]]
        return await super().request(message, request_id=request_id, headers=headers,
                                     notify=notify)


@pytest.fixture()
def bookings_url() -> Iterator[str]:
    """A fresh `mrtr serve examples.bookings:app` on a free 127.0.0.1 port."""
    port = free_port()
    proc = subprocess.Popen([*SERVE, "--port", str(port)], cwd=ROOT, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert proc.poll() is None, "mrtr serve exited early"
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def book(client: Client) -> str:
    async with client:
        result = await client.call_tool("book_return", {"order_id": "A-1001"})
        assert result.is_error is not True, result
        assert client.era.session is not None
        assert client.era.session.protocol_version == "2025-11-25"
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def check_asked(answers: Answers) -> None:
    form = "Return details for order A-1001"
    assert answers.asked[0] == form
    assert answers.asked[1] == f"boxes: must be at most 5\n\n{form}"  # re-asked with the why
    assert answers.asked[2] == "Book a pickup on 2026-08-03 for 2 boxes?"
    assert len(answers.asked) == 3


def test_legacy_client_books_once_over_http_issue12(bookings_url: str) -> None:
    answers = Answers()
    client = Client(HTTPTransport(bookings_url), handlers=Handlers(elicitation=answers),
                    mode="legacy", timeout=30)
    assert asyncio.run(book(client)) == BOOKED
    check_asked(answers)


def test_legacy_client_books_once_over_stdio_issue12() -> None:
    answers = Answers()
    transport = StdioTransport([*SERVE, "--stdio"], env=ENV, cwd=str(ROOT), stderr="tail")
    client = Client(transport, handlers=Handlers(elicitation=answers), mode="legacy",
                    timeout=30)
    assert asyncio.run(book(client)) == BOOKED
    check_asked(answers)


def test_auto_client_negotiates_2026_with_the_same_server_issue12(bookings_url: str) -> None:
    answers = Answers()
    transport = Recording(bookings_url)

    async def go() -> str:
        async with Client(transport, handlers=Handlers(elicitation=answers), timeout=30) as c:
            result = await c.call_tool("book_return", {"order_id": "A-1001"})
            assert c.era.session is None and c.era.probes == 1
            assert c.protocol_version == "2026-07-28"
        return "".join(b.text for b in result.content if isinstance(b, TextContent))

    assert asyncio.run(go()) == BOOKED
    assert "initialize" not in transport.methods
    assert transport.methods[0] == "server/discover"
    check_asked(answers)


def test_auto_client_negotiates_2026_over_stdio_issue12() -> None:
    answers = Answers()
    transport = StdioTransport([*SERVE, "--stdio"], env=ENV, cwd=str(ROOT), stderr="tail")

    async def go() -> str:
        async with Client(transport, handlers=Handlers(elicitation=answers), timeout=30) as c:
            result = await c.call_tool("book_return", {"order_id": "A-1001"})
            assert c.era.session is None and c.era.probes == 1
        return "".join(b.text for b in result.content if isinstance(b, TextContent))

    assert asyncio.run(go()) == BOOKED
    check_asked(answers)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_example_completes_in_a_2025_session_over_stdio_issue12(name: str) -> None:
    # Sampling (research), roots (research) and plain forms (provision) pushed by our server
    # and answered by our client's handlers, exactly as in the 2026 runs of test_examples_e2e.
    command = [sys.executable, "-m", "mrtr", "serve", f"examples.{name}:app", "--stdio"]
    transport = StdioTransport(command, env=ENV, cwd=str(ROOT), stderr="tail")

    async def go() -> str:
        client = Client(transport, handlers=HANDLERS, mode="legacy", timeout=30)
        text = await run_flow(client, name)
        assert client.era.session is not None
        return text

    assert asyncio.run(go()) == SCENARIOS[name][2]
