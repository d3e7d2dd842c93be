"""`mrtr check` against servers built with the official Python SDK from PyPI: `mcp` 1.x
(2025-only) and `mcp` 2.3.0 (2026-07-28, stateless and stateful HTTP, stdio), and FastMCP 4.2.3
(HTTP, stdio), each in its own virtualenv, and the TypeScript SDK 2.4.0 (HTTP, its own
node_modules, tests/check/ts_sdk.py): every verdict matches a recorded expectation file
(tests/check/expected/*.json: rule -> statuses and, for skips and failures, why), so there
are no knock-on FAILs and no 10 s stalls. Set MRTR_RECORD_EXPECTED=1 to re-record after a
deliberate change (then read the diff)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mrtr.check import Options, Report, run
from tests.check.ts_sdk import ts_sdk_argv
from tests.client.test_interop_mcp1 import SERVER, http_server, mcp1_python
from tests.transports.conftest import free_port

pytestmark = pytest.mark.slow
__all__ = ["http_server", "mcp1_python"]  # fixtures used by name below
EXPECTED = Path(__file__).with_name("expected")


def check(options: Options) -> tuple[Report, float]:
    started = time.monotonic()
    report = asyncio.run(asyncio.wait_for(run(options), 120))
    return report, time.monotonic() - started


def verdicts(report: Report) -> dict[str, dict[str, list[str]]]:
    """rule -> status -> sorted details (pass details are left out: they name counts)."""
    out: dict[str, dict[str, list[str]]] = {}
    for f in report.findings:
        details = out.setdefault(f.rule, {}).setdefault(f.status, [])
        if f.status != "pass" and f.detail not in details:
            details.append(f.detail)
    return {r: {s: sorted(d) for s, d in v.items()} for r, v in out.items()}


def matches(name: str, report: Report) -> None:
    path = EXPECTED / f"{name}.json"
    seen = verdicts(report)
    if os.environ.get("MRTR_RECORD_EXPECTED"):
        path.write_text(json.dumps(seen, indent=2, sort_keys=True) + "\n")
    assert seen == json.loads(path.read_text()), json.dumps(seen, indent=2)


def test_official_sdk_server_over_http(http_server: str) -> None:
    report, seconds = check(Options(http_server, call_tools=True))
    matches("mcp1-http", report)
    assert seconds < 8, seconds  # no 10 s stall (the GET probe has its own short timeout)


def test_official_sdk_server_over_stdio(mcp1_python: Path) -> None:
    report, seconds = check(Options(f"{mcp1_python} {SERVER}", stdio=True, call_tools=True))
    matches("mcp1-stdio", report)
    assert seconds < 8, seconds


MCP2 = "mcp==2.3.0"
MCP2_SERVER = Path(__file__).with_name("mcp2_server.py")
FASTMCP = "fastmcp==4.2.3"
FASTMCP_SERVER = Path(__file__).with_name("fastmcp4_server.py")


def venv_with(requirement: str) -> Path:
    """A virtualenv holding `requirement` (built once, reused); skips without PyPI."""
    home = Path(tempfile.gettempdir()) / f"mrtr-tests-{requirement.replace('==', '-')}-venv"
    python = home / "bin" / "python"
    if not (home / ".ready").is_file():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(home)], check=True,
                       capture_output=True, timeout=120)
        pip = subprocess.run([str(python), "-m", "pip", "install", "-q",
                              "--disable-pip-version-check", requirement],
                             capture_output=True, text=True, timeout=600, check=False)
        if pip.returncode != 0:
            pytest.skip(f"cannot install {requirement} from PyPI: {pip.stderr[-300:]}")
        (home / ".ready").touch()
    return python


@pytest.fixture(scope="module")
def mcp2_python() -> Path:
    return venv_with(MCP2)


@pytest.fixture(scope="module")
def fastmcp_python() -> Path:
    return venv_with(FASTMCP)


@contextmanager
def serving(argv: list[str], port: int) -> Iterator[str]:
    """Run a server command until its port answers; stop it by PID after."""
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        child.terminate()
        child.wait(10)


@pytest.fixture(params=["stateless", "stateful"])
def mcp2_http(request: pytest.FixtureRequest, mcp2_python: Path) -> Iterator[tuple[str, str]]:
    port = free_port()
    argv = [str(mcp2_python), str(MCP2_SERVER), "http", str(port), request.param]
    with serving(argv, port) as url:
        yield request.param, url


def test_official_sdk_2_server_over_http(mcp2_http: tuple[str, str]) -> None:
    mode, url = mcp2_http
    report, seconds = check(Options(url, call_tools=True))
    matches(f"mcp2-{mode}-http", report)
    assert seconds < 10, seconds


def test_official_sdk_2_server_over_stdio(mcp2_python: Path) -> None:
    report, seconds = check(Options(f"{mcp2_python} {MCP2_SERVER}", stdio=True,
                                    call_tools=True))
    matches("mcp2-stdio", report)
    assert seconds < 15, seconds


def test_fastmcp_4_server_over_http(fastmcp_python: Path) -> None:
    port = free_port()
    with serving([str(fastmcp_python), str(FASTMCP_SERVER), "http", str(port)], port) as url:
        report, seconds = check(Options(url, call_tools=True))
    matches("fastmcp4-http", report)
    assert seconds < 10, seconds


def test_fastmcp_4_server_over_stdio(fastmcp_python: Path) -> None:
    report, seconds = check(Options(f"{fastmcp_python} {FASTMCP_SERVER}", stdio=True,
                                    call_tools=True))
    matches("fastmcp4-stdio", report)
    assert seconds < 20, seconds


def test_typescript_sdk_server_over_http() -> None:
    """The shared bench harness's server on the official TypeScript SDK 2.4.0 (echo, and the
    2- and 3-round greet and deploy: round 1 mints no state, later rounds an HMAC'd one)."""
    port = free_port()
    with serving(ts_sdk_argv(port), port) as url:
        report, seconds = check(Options(url, call_tools=True))
    matches("ts-sdk-http", report)
    assert seconds < 10, seconds
