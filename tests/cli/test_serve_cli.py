"""`mrtr serve` and `mrtr keys` from the command line: stdio purity, targets, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from mrtr.cli import main
from tests.transports.conftest import ROOT, call, cli_env

NOISY = '''
import sys
from mrtr.server import Server

app = Server("noisy", version="1")

@app.tool()
async def chatter() -> str:
    """Print like a careless tool does, then answer."""
    print("noise from print", flush=True)
    print("more noise, buffered")
    return "done"
'''


def test_serve_stdio_keeps_print_output_off_stdout_issue_20(tmp_path: Path) -> None:
    server = tmp_path / "noisy_server.py"
    server.write_text(NOISY)
    lines = b"".join(msgspec.json.encode(call("chatter", id=n)) + b"\n" for n in (1, 2))
    done = subprocess.run(
        [sys.executable, "-m", "mrtr.cli", "serve", f"{server}:app", "--stdio"],
        input=lines, capture_output=True, cwd=ROOT, env=cli_env(), timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    replies = [json.loads(raw) for raw in done.stdout.splitlines()]  # every line is JSON-RPC
    assert sorted(r["id"] for r in replies) == [1, 2]
    assert {r["result"]["content"][0]["text"] for r in replies} == {"done"}
    assert b"noise" not in done.stdout
    assert done.stderr.count(b"noise from print") == 2
    assert done.stderr.count(b"more noise, buffered") == 2


def test_in_process_stdio_serve_restores_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    stdout = sys.stdout
    assert main(["serve", "tests.transports.apps:nothing", "--stdio"]) == 2
    assert sys.stdout is stdout


@pytest.mark.parametrize(("target", "message"), [
    ("no/such/file.py:app", "mrtr serve: no such file: no/such/file.py\n"),
    ("tests.transports.apps:nothing",
     "mrtr serve: tests.transports.apps has no attribute 'nothing'\n"),
    ("no_such_module_here:app", "mrtr serve: No module named 'no_such_module_here'\n"),
])
def test_unusable_targets_exit_2_with_one_line(
    target: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", target, "--log-level", "error"]) == 2
    assert capsys.readouterr().err == message
