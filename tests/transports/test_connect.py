"""Client(target) and mrtr.connect (#18): a URL, a command line or a Server books a return."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import mrtr
from examples import bookings
from examples.client.quickstart import ask_user
from mrtr.client import Client, Handlers, HTTPTransport, StdioTransport, transport_for
from mrtr.protocol import TextContent
from mrtr.server import Dispatcher, MemoryTransport
from tests.transports.conftest import ROOT, cli_env, free_port, spawn_cli, stop, wait_ready

BOOKINGS = str(ROOT / "examples" / "bookings.py")


async def book(target: object) -> str:
    async with Client(target, handlers=Handlers(elicitation=ask_user), timeout=60) as client:
        result = await client.call_tool("book_return", {"order_id": "A-1001"})
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def test_18_client_of_an_in_process_server_books_a_return() -> None:
    before = len(bookings.carrier.bookings)
    text = asyncio.run(book(bookings.app))
    assert text.startswith("Return RMA-") and text.endswith("label sent to ann@example.com.")
    assert bookings.carrier.bookings[before:] == [("A-1001", 2)]  # the very same carrier


def test_18_mrtr_connect_is_client_of_a_target() -> None:
    client = mrtr.connect(Dispatcher(bookings.app), timeout=5)
    assert isinstance(client, mrtr.Client) and isinstance(client.transport, MemoryTransport)
    assert client.timeout == 5


@pytest.fixture()
def stdio_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The child server sees the checkout and keeps its key file under tmp_path."""
    for name, value in cli_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    yield


@pytest.mark.parametrize("target", [
    f"{sys.executable} {BOOKINGS}",        # a command line, split like a shell would
    [sys.executable, BOOKINGS],            # an argv list
    BOOKINGS,                              # a Python file: run with this interpreter
    [sys.executable, "-m", "mrtr.cli", "serve", BOOKINGS, "--stdio"],  # its `app`, found
], ids=["string", "argv", "file", "serve-file"])
def test_18_client_of_a_command_line_books_a_return(target: object, stdio_env: None) -> None:
    # A fresh server process per call: its first booking is RMA-0001.
    assert asyncio.run(book(target)).startswith("Return RMA-0001 booked: pickup on 2026-08-03")


def test_18_client_of_a_url_books_a_return(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**cli_env(), "XDG_STATE_HOME": str(tmp_path)}
    process = spawn_cli("serve", "examples.bookings:app", "--port", str(port), env=env,
                        stderr=subprocess.DEVNULL)
    try:
        wait_ready(url, process)
        assert asyncio.run(book(url)).startswith("Return RMA-0001 booked")
    finally:
        stop(process)


def test_18_what_each_target_becomes() -> None:
    assert isinstance(transport_for("https://mcp.example.com/mcp"), HTTPTransport)
    stdio = transport_for("uv run 'my server.py' --flag")
    assert isinstance(stdio, StdioTransport) and stdio.argv == ["uv", "run", "my server.py",
                                                                "--flag"]
    assert transport_for(["node", "server.js"]).argv == ["node", "server.js"]  # type: ignore[attr-defined]
    assert transport_for(os.path.join("a", "b.py")).argv == [sys.executable, "a/b.py"]  # type: ignore[attr-defined]
    memory = MemoryTransport(bookings.app)
    assert transport_for(memory) is memory
    assert isinstance(transport_for(bookings.app.http_app()), MemoryTransport)
    with pytest.raises(TypeError, match="cannot connect to 'int'"):
        transport_for(42)
    with pytest.raises(ValueError, match="empty command line"):
        transport_for("  ")
