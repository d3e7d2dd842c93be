"""`mrtr call` against a 2025-only server built with the official `mcp` 1.x package (#12).

The server (`fastmcp_server.py`) runs in its own virtualenv, created once from PyPI in a cached
temporary folder; the test skips, saying why, when PyPI cannot be reached.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect  # type: ignore[import-untyped]
import pytest

from .rogue import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).with_name("fastmcp_server.py")
REQUIREMENT = "mcp>=1.10,<2"
VENV = Path(tempfile.gettempdir()) / "mrtr-tests-mcp1-venv"
LAUNCH = "import sys; from mrtr.cli import main; sys.exit(main())"


@pytest.fixture(scope="module")
def mcp1_python() -> Path:
    """The interpreter of a virtualenv with `mcp` 1.x (built on first use, then reused)."""
    python = VENV / "bin" / "python"
    if (VENV / ".ready").is_file():
        return python
    scratch = Path(tempfile.mkdtemp(prefix="mrtr-mcp1-"))
    try:
        subprocess.run([sys.executable, "-m", "venv", str(scratch / "venv")], check=True,
                       capture_output=True, timeout=120)
        pip = subprocess.run(
            [str(scratch / "venv" / "bin" / "python"), "-m", "pip", "install", "-q",
             "--disable-pip-version-check", REQUIREMENT],
            capture_output=True, text=True, timeout=600, check=False,
        )
        if pip.returncode != 0:
            tail = (pip.stderr or pip.stdout).strip().splitlines()[-1:]
            pytest.skip(f"cannot install {REQUIREMENT} from PyPI: {' '.join(tail)}")
        (scratch / "venv" / ".ready").touch()
        if not (VENV / ".ready").is_file():
            shutil.rmtree(VENV, ignore_errors=True)
            os.replace(scratch / "venv", VENV)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return python


def mrtr_call(*args: str) -> pexpect.spawn:
    env = {**os.environ, "TERM": "dumb"}  # the line forms these expectations read
    child = pexpect.spawn(sys.executable, ["-c", LAUNCH, "call", *args], cwd=str(ROOT),
                          encoding="utf-8", timeout=30, env=env)
    return child


def answer_the_form(child: pexpect.spawn) -> None:
    child.expect("Booking for Hamlet")
    child.expect(r"name \(string")
    child.sendline("Ada")
    child.expect(r"seats \(integer")
    child.sendline("9")  # above the server's maximum: re-asked locally
    child.expect("at most 8")
    child.sendline("2")
    child.expect(r"Send\? \[Y/n\] ")
    child.sendline("y")
    child.expect(r"Booked 2 seat\(s\) for Ada at Hamlet\.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_mrtr_call_elicits_over_stdio(mcp1_python: Path) -> None:
    answer_the_form(mrtr_call("--stdio", f"{mcp1_python} {SERVER} stdio", "book", "show=Hamlet"))


@pytest.fixture
def http_server(mcp1_python: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([str(mcp1_python), str(SERVER), "http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the mcp 1.x server did not start (exit {proc.poll()})")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def test_mrtr_call_elicits_over_http(http_server: str) -> None:
    answer_the_form(mrtr_call(http_server, "book", "show=Hamlet"))
