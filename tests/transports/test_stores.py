"""`mrtr serve` records rounds in a store by default: replays over HTTP charge nothing (#13)."""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr.serving._stores import run_store, with_store
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
        # wait_ready saw one worker; on a loaded machine the other may still be importing the
        # app and take no connection yet: replay on until both answered (bounded).
        give_up = time.monotonic() + 30
        while len({pid for pid, _ in replies}) < 2 and time.monotonic() < give_up:
            replies.append(post(url, final))
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
    log = log_path.read_text()
    assert "exactly-once rounds: SQLite store in" in log
    assert "started by another" not in log  # workers of mrtr serve share one store: no warning


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
    with run_store(None, workers=2) as url:
        assert url.startswith("sqlite:///")
        folder = Path(url[len("sqlite://"):]).parent
        assert folder.is_dir() and folder.stat().st_mode & 0o077 == 0
    assert not folder.exists()


def test_13_store_urls_are_checked_before_serving() -> None:
    with pytest.raises(ValueError, match="unknown store URL"), run_store("ftp://x", workers=1):
        pass
    with pytest.raises(ValueError, match="one process"), run_store("memory:", workers=2):
        pass
    with run_store("none", workers=1) as url:
        assert url == "none"


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


def test_25_the_default_store_of_a_key_file_lives_beside_it_one_per_key_and_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mrtr.serving._stores import KeyOrigin, store_file

    monkeypatch.delenv("MRTR_STORE", raising=False)
    key_file = tmp_path / "mrtr" / "requeststate.key"
    origin = KeyOrigin(key_file=key_file, key=b"k" * 32)
    with run_store(None, workers=1, origin=origin, name="payments") as url:
        assert url == f"sqlite://{store_file(key_file, b'k' * 32, 'payments')}"
    path = Path(url[len("sqlite://"):])
    assert path.parent == key_file.parent and path.name.startswith("store-")
    names = {store_file(key_file, key, name).name
             for key in (b"k" * 32, b"j" * 32) for name in ("payments", "bookings")}
    assert len(names) == 4  # another key or another server: another file
    assert b"k".hex() not in path.name  # a digest, not the key


def test_25_shared_keys_without_a_store_are_warned_about(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    from mrtr.serving._stores import KeyOrigin

    monkeypatch.delenv("MRTR_STORE", raising=False)
    with caplog.at_level(logging.WARNING, "mrtr.serve"), \
            run_store(None, workers=4, origin=KeyOrigin(shared=True)) as url:
        assert url.startswith("sqlite:///")
    assert "MRTR_STATE_KEYS outlive this run but its store does not" in caplog.text


def test_25_a_store_of_a_dispatchers_own_choosing_is_kept() -> None:
    from mrtr.server import Dispatcher
    from mrtr.stores import MemoryStore, SQLiteStore
    from tests.transports import apps

    default = Dispatcher(apps.app)
    assert isinstance(default.store, MemoryStore) and not default.store_given
    assert with_store(default, "none").store is None
    assert isinstance(with_store(default, "sqlite:///tmp/x.db").store, SQLiteStore)
    none = Dispatcher(apps.app, store=None)
    assert with_store(none, "memory:") is none
    assert with_store(default, None) is default


def test_25_http_app_store_none_and_a_warning_for_shared_keys(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from mrtr.server import generate_key
    from mrtr.serving import http_app
    from mrtr.stores import MemoryStore
    from tests.transports import apps

    assert http_app(apps.app, environ={"MRTR_STORE": "none"}).dispatcher.store is None
    with caplog.at_level(logging.WARNING, "mrtr.serve"):
        mcp = http_app(apps.app, environ={"MRTR_STATE_KEYS": generate_key()})
    assert isinstance(mcp.dispatcher.store, MemoryStore)
    assert "MRTR_STATE_KEYS without MRTR_STORE: this app's store is in memory" in caplog.text


def test_25_an_unreachable_redis_at_start_up_is_warned_about_not_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with caplog.at_level(logging.WARNING, "mrtr.serve"), run_store(url, workers=2) as chosen:
        assert chosen == url
    assert "cannot check the redis store now (checking persistence: " in caplog.text


def test_25_replace_keeps_the_store_the_task_policy_and_the_settings() -> None:
    from mrtr.server import Dispatcher, Sealer, TaskPolicy
    from mrtr.stores import MemoryStore
    from tests.transports import apps

    store, policy = MemoryStore(), TaskPolicy(max_live=3)
    own = Dispatcher(apps.app, store=store, tasks=policy, max_rounds=4)
    sealer = Sealer.ephemeral(audience=apps.app.name)
    rekeyed = own.replace(sealer=sealer)
    assert rekeyed.sealer is sealer and rekeyed.store is store and rekeyed.store_given
    assert rekeyed.tasks.book.policy is policy and rekeyed.max_rounds == 4
    assert own.replace(store=None).store is None
    fresh = Dispatcher(apps.app).replace(sealer=sealer)  # its own store: still swappable
    assert isinstance(fresh.store, MemoryStore) and not fresh.store_given
