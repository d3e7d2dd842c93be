"""Shared fixtures of the CLI tests."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.transports.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """`mrtr serve tests.cli.app:app` on a free 127.0.0.1 port."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mrtr.cli", "serve", "tests.cli.app:app", "--port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("mrtr serve did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
