"""The client completes every example server's flow over real HTTP (uvicorn) and over stdio."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr.client import Client, Handlers
from mrtr.client.transports._http import HTTPTransport
from mrtr.client.transports._stdio import StdioTransport
from mrtr.protocol import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    Root,
    TextContent,
)

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}

FORMS = {
    "Return details": {"reason": "broken", "email": "a@b.co", "boxes": 2,
                       "pickup_date": "2026-12-01"},
    "Book a pickup": {"confirm": True},
    "Where should": {"region": "eu-west", "size": 4},
}

# example module → (tool, arguments, the exact text of the final result). Exact, because a
# substring such as "booked" is also in "Return not booked." (a declined flow).
SCENARIOS = {
    "bookings": ("book_return", {"order_id": "A-9"},
                 "Return RMA-0001 booked: pickup on 2026-12-01, label sent to a@b.co."),
    "provision": ("provision", {"name": "vm1"}, "vm1 provisioned in eu-west with 4 vCPUs."),
    "research": ("research", {"topic": "bees"}, "Bees make honey.\nWorkspace: file:///work"),
}


async def elicit(params: ElicitRequestParams) -> ElicitResult:
    content = next(v for k, v in FORMS.items() if params.message.startswith(k))
    return ElicitResult(action="accept", content=content)


async def sample(params: CreateMessageRequestParams) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(text="Bees make honey."),
                               model="test", stop_reason="endTurn")


HANDLERS = Handlers(elicitation=elicit, sampling=sample,
                    roots=[Root(uri="file:///work", name="work")])


async def run_flow(client: Client, name: str) -> str:
    tool, arguments, _ = SCENARIOS[name]
    async with client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error is not True, result
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(params=sorted(SCENARIOS))
def http_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    name: str = request.param
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mrtr.cli", "serve", f"examples.{name}:app", "--port", str(port)],
        cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield name, url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_example_over_http(http_server: tuple[str, str]) -> None:
    name, url = http_server
    text = asyncio.run(asyncio.wait_for(
        run_flow(Client(HTTPTransport(url), handlers=HANDLERS), name), 30))
    assert text == SCENARIOS[name][2]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_example_over_stdio(name: str) -> None:
    command = [sys.executable, "-m", "mrtr.cli", "serve", f"examples.{name}:app", "--stdio"]
    transport = StdioTransport(command, env=ENV, cwd=str(ROOT), stderr=subprocess.DEVNULL)
    text: Any = asyncio.run(asyncio.wait_for(
        run_flow(Client(transport, handlers=HANDLERS), name), 30))
    assert text == SCENARIOS[name][2]
