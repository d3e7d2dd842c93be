"""Interop (#12): the official `mcp` 1.x client, a 2025-11-25-only client, books a return.

`mcp` lives in its own virtualenv (in pytest's cache, made once) so it never meets our deps. The
client fills `book_return`'s form with an invalid answer first (the server re-asks with feedback),
accepts the confirmation, and the booking must be made exactly once, over HTTP and over stdio.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from examples import bookings
from mrtr.http import McpApp
from mrtr.server import Dispatcher
from tests.transports.conftest import ROOT, LiveServer, cli_env, free_port

MCP = "mcp==1.30.0"  # the last 1.x: speaks 2024-11-05 … 2025-11-25, never 2026-07-28

CLIENT = r'''
import asyncio, json, sys
from mcp import ClientSession
from mcp.types import ElicitResult

asked = []


async def elicit(context, params):
    asked.append(params.message)
    if "confirm" in params.requestedSchema.get("properties", {}):
        return ElicitResult(action="accept", content={"confirm": True})
    boxes = 9 if len(asked) == 1 else 2  # 9 breaks the form's 1..5 rule: the server re-asks
    return ElicitResult(action="accept", content={
        "reason": "broken", "email": "ada@example.com", "boxes": boxes,
        "pickup_date": "2026-12-01"})


async def drive(read, write):
    async with ClientSession(read, write, elicitation_callback=elicit) as session:
        init = await session.initialize()
        result = await session.call_tool("book_return", {"order_id": "A-1001"})
        print(json.dumps({"version": init.protocolVersion, "asked": asked,
                          "is_error": result.isError, "text": result.content[0].text}))


async def main(kind, target):
    if kind == "http":
        from mcp.client.streamable_http import streamablehttp_client
        async with streamablehttp_client(target) as (read, write, _):
            await drive(read, write)
    else:
        from mcp.client.stdio import StdioServerParameters, stdio_client
        command = json.loads(target)
        server = StdioServerParameters(command=command[0], args=command[1:],
                                       env=json.loads(sys.argv[3]), cwd=sys.argv[4])
        async with stdio_client(server) as (read, write):
            await drive(read, write)


asyncio.run(main(sys.argv[1], sys.argv[2]))
'''


@pytest.fixture(scope="module")
def mcp_python(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv holding the official `mcp` 1.x package; skips when PyPI is unreachable."""
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    home = (cache.mkdir("mcp-1.30.0-venv") if cache is not None
            else tmp_path_factory.mktemp("mcp-1.30.0-venv"))
    python = home / "bin" / "python"
    ready = home / ".installed"
    if not ready.exists():
        venv.create(home, with_pip=True, clear=True)
        install = subprocess.run([str(python), "-m", "pip", "install", "-q", MCP],
                                 capture_output=True, text=True, timeout=600, check=False)
        if install.returncode != 0:
            pytest.skip(f"cannot install {MCP} from PyPI: {install.stderr[-500:]}")
        ready.write_text(MCP)
    return python


def drive(python: Path, *args: str) -> dict[str, object]:
    script = Path(python).parent.parent / "client.py"
    script.write_text(CLIENT)
    done = subprocess.run([str(python), str(script), *args], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def check(outcome: dict[str, object]) -> None:
    assert outcome["version"] == "2025-11-25"
    assert outcome["is_error"] is False, outcome
    asked = outcome["asked"]
    assert isinstance(asked, list) and len(asked) == 3, asked
    assert asked[0] == "Return details for order A-1001"
    assert asked[1] == f"boxes: must be at most 5\n\n{asked[0]}"  # re-asked with feedback
    assert str(asked[2]).startswith("Book a pickup on 2026-12-01 for 2 boxes?")


@pytest.mark.slow
def test_official_client_books_once_over_http(mcp_python: Path) -> None:
    port = free_port()
    app = McpApp(Dispatcher(bookings.app), allowed_hosts=[f"127.0.0.1:{port}"])
    before = len(bookings.carrier.bookings)
    with LiveServer(app, port) as server:
        outcome = drive(mcp_python, "http", f"{server.url}/mcp")
    check(outcome)
    assert bookings.carrier.bookings[before:] == [("A-1001", 2)]  # exactly once
    assert str(outcome["text"]).startswith("Return RMA-")


@pytest.mark.slow
def test_official_client_books_once_over_stdio(mcp_python: Path) -> None:
    command = [sys.executable, "-m", "mrtr.cli", "serve", "examples.bookings:app", "--stdio"]
    outcome = drive(mcp_python, "stdio", json.dumps(command), json.dumps(cli_env()), str(ROOT))
    check(outcome)
    # A fresh server process: its first booking is RMA-0001, and a second would be RMA-0002.
    assert str(outcome["text"]).startswith("Return RMA-0001 booked")


@pytest.mark.slow
def test_18_official_client_books_once_from_app_run(mcp_python: Path) -> None:
    # `python examples/bookings.py` ends in `app.run()`: stdio, as desktop clients launch it.
    command = [sys.executable, str(ROOT / "examples" / "bookings.py")]
    env = {**cli_env(), "MRTR_EPHEMERAL_KEY": "1"}
    outcome = drive(mcp_python, "stdio", json.dumps(command), json.dumps(env), "/")
    check(outcome)
    assert str(outcome["text"]).startswith("Return RMA-0001 booked")
