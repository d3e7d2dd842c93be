"""`mrtr serve` as a process: rounds across workers, shared keys, file targets, clean exits."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from mrtr.http import McpApp
from mrtr.server import Dispatcher, Sealer, generate_key, parse_keys
from tests.transports import apps
from tests.transports.conftest import (
    ROOT,
    asgi_client,
    call,
    cli_env,
    free_port,
    post_args,
    request,
    run,
    spawn_cli,
    stop,
    wait_ready,
)

ATTEMPTS = 200


def post_elsewhere(url: str, body: dict[str, Any], used: set[str]) -> tuple[str, dict[str, Any]]:
    """POST on fresh connections until a worker not in `used` answers (bounded)."""
    for _ in range(ATTEMPTS):
        response = httpx.post(url, timeout=10, **post_args(body, connection="close"))
        pid = response.headers["mcp-debug-worker"]
        if pid not in used:
            result: dict[str, Any] = response.json()["result"]
            return pid, result
    raise AssertionError(f"no worker outside {used} answered in {ATTEMPTS} attempts")


ANSWERS = [{"name": {"action": "accept", "content": {"name": "Ada"}}},
           {"color": {"action": "accept", "content": {"color": "teal"}}}]


def next_params(result: dict[str, Any], round_no: int) -> dict[str, Any]:
    assert result["resultType"] == "input_required", result
    return {"inputResponses": ANSWERS[round_no], "requestState": result["requestState"]}


def running(pid: int) -> bool:
    """Whether `pid` is a live (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def serve_workers(tmp_path: Path, target: str, workers: int, env: dict[str, str] | None = None,
                  ) -> tuple[str, subprocess.Popen[bytes], Path]:
    port = free_port()
    log_path = tmp_path / "stderr.log"
    with log_path.open("wb") as log:
        process = spawn_cli("serve", target, "--workers", str(workers), "--port", str(port),
                            "--debug-worker-header", "--log-level", "info",
                            stdout=subprocess.DEVNULL, stderr=log, env={**cli_env(), **(env or {})})
    return f"http://127.0.0.1:{port}/mcp", process, log_path


def test_each_round_on_a_different_worker(tmp_path: Path) -> None:
    url, process, log_path = serve_workers(tmp_path, "tests.transports.apps:app", 3)
    try:
        wait_ready(url, process)
        used: set[str] = set()
        params: dict[str, Any] = {}
        for round_no in range(3):
            pid, result = post_elsewhere(url, call("greet", id=round_no, **params), used)
            used.add(pid)
            if round_no < 2:
                params = next_params(result, round_no)
        assert len(used) == 3
        assert result["content"][0]["text"] == "Hello Ada, you like teal"
        # SIGTERM to the supervisor: a clean exit that takes every worker with it.
        process.terminate()
        assert process.wait(20) == 0, log_path.read_text()
        deadline = time.monotonic() + 10
        while any(running(int(pid)) for pid in used) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in used if running(int(pid))], "workers outlived mrtr serve"
        # 2025 sessions live in one worker: said once, with the way out (#12).
        assert log_path.read_text().count("hash $http_mcp_session_id consistent") == 1
    except AssertionError:
        print(log_path.read_text())
        raise
    finally:
        stop(process)


def test_workers_seal_with_mrtr_state_keys_for_a_dispatcher_target_issue_11(
    tmp_path: Path,
) -> None:
    # A round sealed by one worker is opened by another worker and by a separate process that
    # only shares MRTR_STATE_KEYS: neither works if a worker seals with a key of its own.
    key = generate_key()
    url, process, log_path = serve_workers(tmp_path, "tests.transports.apps:dispatcher", 2,
                                           {"MRTR_STATE_KEYS": key})
    try:
        wait_ready(url, process)
        first, result = post_elsewhere(url, call("greet", id=1), set())
        _, result = post_elsewhere(url, call("greet", id=2, **next_params(result, 0)), {first})
        sealer = Sealer(keys=parse_keys(key), audience=apps.app.name)
        elsewhere = McpApp(Dispatcher(apps.app, sealer=sealer))

        async def finish() -> httpx.Response:
            async with asgi_client(elsewhere) as client:
                body = call("greet", id=3, **next_params(result, 1))
                return await client.post("/mcp", **post_args(body))

        final = run(finish()).json()["result"]
        assert final["content"][0]["text"] == "Hello Ada, you like teal"
    except AssertionError:
        print(log_path.read_text())
        raise
    finally:
        stop(process)


def test_file_target_with_workers_and_a_sibling_import_issue_11(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "greeting.py").write_text('WORDS = "Hello from a sibling"\n')
    (project / "my_server.py").write_text(
        "from greeting import WORDS\n"
        "from mrtr.server import Server\n"
        "app = Server('file-target', version='1')\n"
        "@app.tool()\n"
        "async def hello() -> str:\n"
        "    return WORDS\n"
    )
    url, process, log_path = serve_workers(tmp_path, str(project / "my_server.py") + ":app", 2)
    try:
        wait_ready(url, process)
        used: set[str] = set()
        for round_no in range(2):
            pid, result = post_elsewhere(url, call("hello", id=round_no), used)
            used.add(pid)
            assert result["content"][0]["text"] == "Hello from a sibling"
    except AssertionError:
        print(log_path.read_text())
        raise
    finally:
        stop(process)


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
    assert "requestState key kept in" in text  # a local server keeps its key (#19)
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
