"""`mrtr serve --workers 3`: one MRTR flow whose three rounds are served by three processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.transports.conftest import (
    ROOT,
    call,
    cli_env,
    free_port,
    post_args,
    request,
    spawn_cli,
    stop,
)

ATTEMPTS = 200


def wait_ready(url: str, process: subprocess.Popen[bytes], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "mrtr serve exited early"
        try:
            if httpx.post(url, timeout=2, **post_args(request("server/discover"))).is_success:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("mrtr serve did not become ready")


def post_elsewhere(url: str, body: dict[str, Any], used: set[str]) -> tuple[str, dict[str, Any]]:
    """POST on fresh connections until a worker not in `used` answers (bounded)."""
    for _ in range(ATTEMPTS):
        response = httpx.post(url, timeout=10, **post_args(body, connection="close"))
        pid = response.headers["mcp-debug-worker"]
        if pid not in used:
            result: dict[str, Any] = response.json()["result"]
            return pid, result
    raise AssertionError(f"no worker outside {used} answered in {ATTEMPTS} attempts")


def test_each_round_on_a_different_worker(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log = (tmp_path / "stderr.log").open("wb")
    process = spawn_cli("serve", "tests.transports.apps:app", "--workers", "3", "--port",
                        str(port), "--debug-worker-header", "--log-level", "warning",
                        stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_ready(url, process)
        used: set[str] = set()
        answers = [{"name": {"action": "accept", "content": {"name": "Ada"}}},
                   {"color": {"action": "accept", "content": {"color": "teal"}}}]
        params: dict[str, Any] = {}
        for round_no in range(3):
            pid, result = post_elsewhere(url, call("greet", id=round_no, **params), used)
            used.add(pid)
            if round_no < 2:
                assert result["resultType"] == "input_required"
                params = {"inputResponses": answers[round_no],
                          "requestState": result["requestState"]}
        assert len(used) == 3
        assert result["content"][0]["text"] == "Hello Ada, you like teal"
    except AssertionError:
        log.flush()
        print((tmp_path / "stderr.log").read_text())
        raise
    finally:
        stop(process)
        log.close()
    assert process.returncode is not None


def test_single_process_serve_exits_cleanly_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log = (tmp_path / "stderr.log").open("wb")
    process = spawn_cli("serve", "tests.transports.apps:app", "--port", str(port),
                        stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_ready(url, process)
        own = post_args(request("server/discover"), host=f"localhost:{port}")
        assert httpx.post(url, timeout=5, **own).status_code == 200
        hostile = post_args(request("server/discover"), host="evil.example.com")
        assert httpx.post(url, timeout=5, **hostile).status_code == 403
        process.terminate()
        # uvicorn shuts down gracefully, then re-raises the signal it captured.
        assert process.wait(10) in (0, -signal.SIGTERM)
    finally:
        stop(process)
        log.close()
    text = (tmp_path / "stderr.log").read_text()
    assert "ephemeral key" in text
    assert "Application shutdown complete" in text


def test_keys_generate_prints_a_usable_key() -> None:
    from mrtr.cli import main
    from mrtr.server import parse_keys

    out = subprocess.run(
        [sys.executable, "-m", "mrtr.cli", "keys", "generate"], capture_output=True, check=True,
        cwd=ROOT, env=cli_env(), timeout=30,
    ).stdout.decode().strip()
    assert len(parse_keys(out)[0]) == 32
    assert main(["keys", "generate"]) == 0


def test_bad_target_is_a_usage_error() -> None:
    from mrtr.cli import main

    assert main(["serve", "tests.transports.apps:nothing", "--stdio"]) == 2
    assert main(["serve", "no_colon", "--stdio"]) == 2
