"""The client examples in examples/client/ run as written against a real server, and
docs/client.md shows each one verbatim (so the docs cannot drift from what is tested)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mrtr.client import Client
from mrtr.client.transports._http import HTTPTransport
from mrtr.errors import MissingRequiredClientCapability
from tests.client.rogue import free_port

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
EXAMPLES = ROOT / "examples" / "client"
BOOKED = "result: Return RMA-0001 booked: pickup on 2026-08-03, label sent to ann@example.com.\n"
EXPECTED = {
    "quickstart.py": (
        "tools: book_return\n"
        "asked: Return details for order A-1001\n"
        "asked: Book a pickup on 2026-08-03 for 2 boxes?\n" + BOOKED
    ),
    "manual_steps.py": (
        "round 1 asks for details\n"
        "round 2 asks for confirm\n"
        "resumed at round 2 asking for confirm\n" + BOOKED
    ),
    "connect.py": (  # #18: also run in process and over stdio in tests/test_examples.py
        "asked: Return details for order A-1001\n"
        "asked: Book a pickup on 2026-08-03 for 2 boxes?\n" + BOOKED
    ),
    "legacy.py": (  # a 2025 session with our own server: initialize, then pushed asks
        "asked: Return details for order A-1001\n"
        "asked: Book a pickup on 2026-08-03 for 2 boxes?\n"
        "session: 2025-11-25\n" + BOOKED
    ),
}


@pytest.fixture()
def bookings_url() -> Iterator[str]:
    """A fresh `mrtr serve examples.bookings:app` on 127.0.0.1 (RMA numbers start at 1)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mrtr", "serve", "examples.bookings:app", "--port", str(port)],
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
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_every_client_example_has_an_expected_output() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_client_example_runs_against_a_real_server_issue19(name: str, bookings_url: str) -> None:
    out = subprocess.run([sys.executable, str(EXAMPLES / name), bookings_url], cwd=ROOT, env=ENV,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_client_docs_show_the_example_verbatim_issue19(name: str) -> None:
    docs = (ROOT / "docs" / "client.md").read_text(encoding="utf-8")
    code = (EXAMPLES / name).read_text(encoding="utf-8")
    titled = f'```python title="examples/client/{name}"\n{code}```'
    assert f"```python\n{code}```" in docs or titled in docs, \
        f"docs/client.md must show examples/client/{name}"


def test_testing_tour_runs_and_is_shown_verbatim_issue19() -> None:
    path = ROOT / "examples" / "testing" / "test_tour.py"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(path)], cwd=ROOT, env=ENV, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "5 passed" in out.stdout
    docs = (ROOT / "docs" / "testing-your-server.md").read_text(encoding="utf-8")
    assert f"```python\n{path.read_text(encoding='utf-8')}```" in docs


def test_manual_flow_without_capabilities_names_the_missing_one_issue19(
    bookings_url: str,
) -> None:
    async def go() -> None:
        async with Client(HTTPTransport(bookings_url)) as client:
            await client.start_tool_call("book_return", {"order_id": "A-1"}).step()

    with pytest.raises(MissingRequiredClientCapability) as caught:
        asyncio.run(go())
    assert str(caught.value) == "Missing required client capability (needs elicitation.form)"
    assert caught.value.required == {"elicitation": {"form": {}}}
