"""`mrtr serve` records rounds in a store by default: replays over HTTP charge nothing (#13)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr.serving._stores import store_url, with_store
from tests.transports.conftest import (
    call,
    cli_env,
    free_port,
    post_args,
    spawn_cli,
    stop,
    wait_ready,
)

CONFIRM = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
          ) -> tuple[str, subprocess.Popen[bytes], Path]:
    port = free_port()
    log_path = tmp_path / "stderr.log"
    with log_path.open("wb") as log:
        process = spawn_cli("serve", "examples.payments:app", "--port", str(port),
                            "--debug-worker-header", *args, stdout=subprocess.DEVNULL,
                            stderr=log, env={**cli_env(), **(env or {})})
    return f"http://127.0.0.1:{port}/mcp", process, log_path


def post(url: str, body: dict[str, Any]) -> tuple[str, bytes]:
    """POST on a fresh connection (so any worker may answer): (worker pid, reply bytes)."""
    response = httpx.post(url, timeout=10, **post_args(body, connection="close"))
    return response.headers["mcp-debug-worker"], response.content


def test_13_mrtr_serve_workers_replay_the_final_round_without_a_second_charge(
    tmp_path: Path,
) -> None:
    url, process, log_path = serve(tmp_path, "--workers", "2")
    try:
        wait_ready(url, process)
        args = {"invoice": "INV-1", "amount": 40}
        first = httpx.post(url, timeout=10, **post_args(call("pay", args, id=1))).json()
        final = call("pay", args, id=2, requestState=first["result"]["requestState"],
                     inputResponses=CONFIRM)
        replies = [post(url, final) for _ in range(12)]
        workers = {pid for pid, _ in replies}
        bodies = {body for _, body in replies}
        assert len(bodies) == 1, bodies
        assert b"receipt R-INV-1-1." in bodies.pop()
        counted = httpx.post(url, timeout=10, **post_args(call("charges", {"invoice": "INV-1"})))
        assert counted.json()["result"]["content"][0]["text"] == "1"
        other = call("pay", args, id=2, requestState=first["result"]["requestState"],
                     inputResponses={"confirm": {"action": "decline"}})
        rejected = httpx.post(url, timeout=10, **post_args(other)).json()
        assert rejected["error"] == {"code": -32602, "message": "Invalid or expired requestState"}
        assert len(workers) == 2, "every replay landed on one worker: the test proves less"
    except AssertionError:
        print(log_path.read_text())
        raise
    finally:
        stop(process)
    assert "exactly-once rounds: SQLite store in" in log_path.read_text()


def test_13_store_none_serves_without_a_store(tmp_path: Path) -> None:
    url, process, log_path = serve(tmp_path, "--store", "none")
    try:
        wait_ready(url, process)
        args = {"invoice": "INV-2", "amount": 1}
        first = httpx.post(url, timeout=10, **post_args(call("pay", args, id=1))).json()
        final = call("pay", args, id=2, requestState=first["result"]["requestState"],
                     inputResponses=CONFIRM)
        other = call("pay", args, id=3, requestState=first["result"]["requestState"],
                     inputResponses={"confirm": {"action": "decline"}})
        texts = [httpx.post(url, timeout=10, **post_args(body)).json()["result"]["content"][0]
                 ["text"] for body in (final, final, other)]
        # Without a store the round runs again, even with other answers (a store refuses
        # those with -32602); the charge still happens once: it is keyed by the flow.
        assert texts == ["Paid 1 EUR for invoice INV-2: receipt R-INV-2-1.",
                         "Paid 1 EUR for invoice INV-2: receipt R-INV-2-1.",
                         "Invoice INV-2 not paid."]
    finally:
        stop(process)


def test_13_the_default_store_lives_in_a_private_directory_removed_at_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MRTR_STORE", raising=False)
    with store_url(None, 2) as url:
        assert url is not None and url.startswith("sqlite:///")
        folder = Path(url[len("sqlite://"):]).parent
        assert folder.is_dir() and folder.stat().st_mode & 0o077 == 0
    assert not folder.exists()


def test_13_store_urls_are_checked_before_serving() -> None:
    with pytest.raises(ValueError, match="unknown store URL"), store_url("ftp://x", 1):
        pass
    with pytest.raises(ValueError, match="one process"), store_url("memory:", 2):
        pass
    with store_url("none", 1) as url:
        assert url is None


def test_13_a_dispatcher_with_its_own_store_keeps_it() -> None:
    from mrtr.server import Dispatcher
    from mrtr.stores import MemoryStore
    from tests.transports import apps

    own = Dispatcher(apps.app, store=MemoryStore())
    assert with_store(own, "memory:") is own
    assert with_store(Dispatcher(apps.app), "memory:").store is not None


def test_13_workers_open_the_parents_store_and_its_url_does_not_outlive_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from mrtr.server import generate_key
    from mrtr.serving import _serve

    seen: dict[str, Any] = {}

    def run_uvicorn(app: object, **options: object) -> int:
        seen["url"] = os.environ.get("MRTR_STORE")
        seen["store"] = _serve._worker_app().dispatcher.store  # type: ignore[union-attr]
        return 0

    monkeypatch.setattr(_serve, "_run_uvicorn", run_uvicorn)
    monkeypatch.delenv("MRTR_STORE", raising=False)
    monkeypatch.setenv("MRTR_STATE_KEYS", generate_key())
    assert _serve.serve("examples.payments:app", workers=2, port=9) == 0
    assert seen["url"].startswith("sqlite:///") and seen["store"] is not None
    assert "MRTR_STORE" not in os.environ
