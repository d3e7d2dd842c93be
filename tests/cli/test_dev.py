"""`mrtr dev` (#18): prints the URL and a call line, and reloads after a file edit."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from examples import bookings
from mrtr.cli._dev import try_line
from tests.transports.conftest import call, cli_env, post_args, request, stop

SERVER = '''\
from mrtr import Server

app = Server("devtest", version="1")


@app.tool()
def hello(name: str) -> str:
    """Say hello."""
    return f"hello {name}"
'''
ADDED = '''

@app.tool()
def goodbye() -> str:
    """Say goodbye."""
    return "goodbye"
'''


def tools(url: str) -> set[str]:
    reply = httpx.post(url, timeout=5, **post_args(request("tools/list"))).json()
    return {tool["name"] for tool in reply["result"]["tools"]}


@pytest.mark.slow
def test_18_mrtr_dev_reloads_after_a_file_edit(tmp_path: Path) -> None:
    source = tmp_path / "devtest_app.py"
    source.write_text(SERVER)
    env = {**cli_env(), "XDG_STATE_HOME": str(tmp_path / "state")}
    with (tmp_path / "log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "mrtr.cli", "dev", str(source), "--port", "0"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert process.stdout is not None
        announced = process.stdout.readline()
        assert announced.startswith("mrtr dev: serving on http://127.0.0.1:"), announced
        url = announced.split()[4].rstrip(";")
        assert process.stdout.readline() == f"  try: mrtr call {url} hello name=TEXT\n"
        assert wait_for(lambda: tools(url) == {"hello"})
        assert edit_until(source, SERVER + ADDED, lambda: tools(url) == {"hello", "goodbye"}), (
            tmp_path / "log").read_text()
    finally:
        stop(process)  # type: ignore[arg-type]
        if process.stdout is not None:
            process.stdout.close()


def edit_until(source: Path, text: str, check: object, seconds: float = 30.0) -> bool:
    """Write `text` to `source` until `check()` holds. An edit can land before the reloader
    watches the folder, and then it never sees it: each write after the first is another
    chance (a no-op for a reloader that saw the first)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        source.write_text(text)
        if wait_for(check, 3.0):
            return True
    return False


def wait_for(check: object, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return True
        except (httpx.TransportError, KeyError, ValueError):
            pass
        time.sleep(0.2)
    return False


def test_18_the_call_line_names_the_first_tool_and_its_required_arguments() -> None:
    url = "http://127.0.0.1:8000/mcp"
    assert try_line(url, bookings.app) == f"mrtr call {url} book_return order_id=TEXT"
    assert try_line(url, bookings.app.http_app()) == try_line(url, bookings.app)
    assert try_line(url, object()) == f"mrtr tools {url}"


def test_18_mrtr_dev_refuses_a_bad_target_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mrtr.cli", "dev", "nowhere/missing.py"],
                          cwd=tmp_path, env=cli_env(), capture_output=True, text=True,
                          timeout=60, check=False)
    assert (done.returncode, done.stderr) == (2, "mrtr dev: no such file: nowhere/missing.py\n")


BUGGY = '''\
from mrtr import Server

app = Server("devbug", version="1")


@app.tool()
def boom() -> str:
    """Fail."""
    return str({}["missing key"])
'''


@pytest.mark.slow
def test_mrtr_dev_shows_the_exception_and_logs_each_request_issue27(tmp_path: Path) -> None:
    source = tmp_path / "devbug_app.py"
    source.write_text(BUGGY)
    env = {**cli_env(), "XDG_STATE_HOME": str(tmp_path / "state")}
    log = tmp_path / "log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "mrtr.cli", "dev", str(source), "--port", "0"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=sink, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[4].rstrip(";")
        assert wait_for(lambda: tools(url) == {"boom"})
        reply = httpx.post(url, timeout=5, **post_args(call("boom", id="dev-1"))).json()
        assert reply["result"]["isError"] is True
        assert reply["result"]["content"][0]["text"] == "Tool boom failed: KeyError: 'missing key'"
        assert wait_for(lambda: "tools/call boom" in log.read_text())
    finally:
        stop(process)  # type: ignore[arg-type]
        if process.stdout is not None:
            process.stdout.close()
    line = next(x for x in log.read_text().splitlines() if "tools/call boom" in x)
    assert line.startswith("INFO mrtr.requests: tools/call boom: complete, isError (")
    assert "[request=dev-1 flow=- round=1 principal=-]" in line
