"""The record of a round lives as long as its state can be replayed (#25): real processes.

The effect of every flow is a line in a file outside every store (tests/transports/effects_app),
so a re-run that a lost record lets through shows as a second line and a new receipt.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from mrtr.http import McpApp
from mrtr.server import Dispatcher, Peer
from mrtr.serving import http_app
from tests.stores.conftest import REDIS_SERVER, start_redis, stop_redis
from tests.transports import effects_app
from tests.transports.conftest import (
    ROOT,
    LiveServer,
    call,
    cli_env,
    free_port,
    post_args,
    spawn_cli,
    stop,
    wait_ready,
)

CONFIRM = {"confirm": {"action": "accept", "content": {"confirm": True}}}
TARGET = "tests.transports.effects_app:app"
redis_only = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")


@contextlib.contextmanager
def served(log: Path, *args: str, env: dict[str, str]) -> Iterator[str]:
    """`mrtr serve TARGET ARGS` on a free port until the block ends; its log goes to `log`."""
    port = free_port()
    with log.open("ab") as out:
        process = spawn_cli("serve", TARGET, "--port", str(port), *args,
                            stdout=subprocess.DEVNULL, stderr=out, env=env)
    try:
        wait_ready(f"http://127.0.0.1:{port}/mcp", process)
        yield f"http://127.0.0.1:{port}/mcp"
    except BaseException:
        print(log.read_text())
        raise
    finally:
        stop(process)


def refused(*args: str, env: dict[str, str]) -> str:
    """`mrtr serve TARGET ARGS` must exit 2 before serving: its stderr."""
    done = subprocess.run([sys.executable, "-m", "mrtr.cli", "serve", TARGET, "--port",
                           str(free_port()), *args], cwd=ROOT, env=env, capture_output=True,
                          timeout=60, check=False)
    assert done.returncode == 2, done.stderr.decode()
    return done.stderr.decode()


def post(url: str, body: dict[str, Any]) -> bytes:
    return httpx.post(url, timeout=10, **post_args(body)).content


def final_round(url: str, invoice: str) -> dict[str, Any]:
    """Start a payment on `url`: the final round (the confirmation) to send anywhere."""
    first = msgspec.json.decode(post(url, call("pay", {"invoice": invoice}, id=1)))
    return call("pay", {"invoice": invoice}, id=2, requestState=first["result"]["requestState"],
                inputResponses=CONFIRM)


def environment(tmp_path: Path, state: str = "state") -> dict[str, str]:
    return {**cli_env(), "XDG_STATE_HOME": str(tmp_path / state),
            "MRTR_TEST_EFFECTS": str(tmp_path / "effects")}


def effects(tmp_path: Path) -> list[str]:
    path = tmp_path / "effects"
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


def test_25_a_restarted_default_server_replays_the_final_round_it_finished(
    tmp_path: Path,
) -> None:
    env, log = environment(tmp_path), tmp_path / "serve.log"
    with served(log, env=env) as url:
        final = final_round(url, "INV-1")
        before = post(url, final)
    with served(log, env=env) as url:  # a new process: the key file and the store beside it
        after = post(url, final)
    assert b"receipt R-INV-1-1." in before
    assert after == before
    assert effects(tmp_path) == ["INV-1"]
    stores = sorted((tmp_path / "state" / "mrtr").glob("store-*.db"))
    assert len(stores) == 1
    assert log.read_text().count(f"SQLite store {stores[0]}, beside the key file") == 2


def test_25_two_default_servers_with_their_own_keys_refuse_each_others_rounds(
    tmp_path: Path,
) -> None:
    log = tmp_path / "serve.log"
    with served(log, env=environment(tmp_path, "alice")) as one, \
            served(log, env=environment(tmp_path, "bob")) as other:
        final = final_round(one, "INV-2")
        stray = msgspec.json.decode(post(other, final))
        done = post(one, final)
        again = msgspec.json.decode(post(other, final))
        own = post(other, final_round(other, "INV-2B"))  # the other's own flow, its own store
    assert stray["error"] == again["error"] == {"code": -32602,
                                                 "message": "Invalid or expired requestState"}
    assert b"receipt R-INV-2-1." in done and b"receipt R-INV-2B-1." in own
    assert effects(tmp_path) == ["INV-2", "INV-2B"]
    stores = [p.name for p in (tmp_path / "alice" / "mrtr").glob("store-*.db")] + \
        [p.name for p in (tmp_path / "bob" / "mrtr").glob("store-*.db")]
    assert len(set(stores)) == 2, stores  # one store per key


def test_25_two_default_servers_with_one_key_file_share_its_store(tmp_path: Path) -> None:
    env, log = environment(tmp_path), tmp_path / "serve.log"
    with served(log, env=env) as one, served(log, env=env) as other:
        final = final_round(one, "INV-3")
        there = post(other, final)  # minted by one, run by the other
        here = post(one, final)  # replayed from the store they share
    assert b"receipt R-INV-3-1." in there and here == there
    assert effects(tmp_path) == ["INV-3"]


def test_25_a_hand_built_dispatcher_runs_a_thrice_replayed_round_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MRTR_TEST_EFFECTS", str(tmp_path / "effects"))

    async def replay(dispatcher: Dispatcher) -> set[bytes]:
        start = msgspec.json.encode(call("pay", {"invoice": "INV-4"}, id=1))
        first = msgspec.json.decode((await dispatcher.handle_bytes(start, Peer())).body)
        final = msgspec.json.encode(call("pay", {"invoice": "INV-4"}, id=2, inputResponses=CONFIRM,
                                         requestState=first["result"]["requestState"]))
        return {(await dispatcher.handle_bytes(final, Peer())).body for _ in range(3)}

    assert len(asyncio.run(replay(Dispatcher(effects_app.app)))) == 1
    assert effects(tmp_path) == ["INV-4"]
    # The control: asked for no store, the same replays charge three times.
    assert len(asyncio.run(replay(Dispatcher(effects_app.app, store=None)))) == 3
    assert effects(tmp_path) == ["INV-4"] * 4


def test_25_a_hand_built_mcp_app_under_uvicorn_runs_a_replayed_round_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MRTR_TEST_EFFECTS", str(tmp_path / "effects"))
    with LiveServer(McpApp(Dispatcher(effects_app.app))) as live:
        url = f"{live.url}/mcp"
        final = final_round(url, "INV-5")
        replies = {post(url, final) for _ in range(3)}
    assert len(replies) == 1 and b"receipt R-INV-5-1." in replies.pop()
    assert effects(tmp_path) == ["INV-5"]


@pytest.mark.parametrize("store", ["none", "memory:"])
def test_25_workers_without_a_shared_store_are_refused_unless_forced(
    tmp_path: Path, store: str,
) -> None:
    env = environment(tmp_path)
    message = refused("--store", store, "--workers", "2", env=env)
    assert "with 2 workers each would keep its own tasks and 2025 answers" in message
    assert "--allow-unshared-store to serve so anyway" in message
    log = tmp_path / "serve.log"
    with served(log, "--store", store, "--workers", "2", "--allow-unshared-store",
                env=env) as url:
        assert b'"resultType":"input_required"' in post(url, call("pay", {"invoice": "I"}))
    assert "WARNING mrtr.serve: --allow-unshared-store: " in log.read_text()


@redis_only
def test_25_a_redis_without_persistence_is_refused_at_start_up(tmp_path: Path) -> None:
    redis, url = start_redis(tmp_path, durable=False)
    env, log = environment(tmp_path), tmp_path / "serve.log"
    try:
        message = refused("--store", url, env=env)
        assert f"\nmrtr serve: store {url}: redis at 127.0.0.1:" in f"\n{message}"
        assert "does not persist every write (appendonly is no; save is empty" in message
        assert "allow_volatile=1 in the store URL" in message
        with served(log, "--store", f"{url}?allow_volatile=1", env=env) as served_url:
            final = final_round(served_url, "INV-6")
            assert post(served_url, final) == post(served_url, final)
    finally:
        stop_redis(redis)
    assert effects(tmp_path) == ["INV-6"]
    assert "redis store accepted without durable persistence (allow_volatile=1)" in \
        log.read_text()


@redis_only
def test_25_a_redis_with_an_append_only_file_is_accepted(tmp_path: Path) -> None:
    redis, url = start_redis(tmp_path, durable=True)
    env, log = environment(tmp_path), tmp_path / "serve.log"
    try:
        with served(log, "--store", url, "--workers", "2", env=env) as served_url:
            final = final_round(served_url, "INV-7")
            replies = {post(served_url, final) for _ in range(4)}
    finally:
        stop_redis(redis)
    assert len(replies) == 1 and effects(tmp_path) == ["INV-7"]
    assert "redis store: appendonly yes, appendfsync everysec" in log.read_text()


@redis_only
def test_25_http_app_does_not_start_on_a_redis_without_persistence(tmp_path: Path) -> None:
    redis, url = start_redis(tmp_path, durable=False)
    sent: list[dict[str, Any]] = []
    inbox = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def receive() -> dict[str, Any]:
        return inbox.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    try:
        mcp = http_app(effects_app.app, environ={"MRTR_STORE": url})
        asyncio.run(mcp({"type": "lifespan"}, receive, send))
    finally:
        stop_redis(redis)
    assert [m["type"] for m in sent] == ["lifespan.startup.failed"]
    assert "does not persist every write (appendonly is no" in sent[0]["message"]


@pytest.mark.slow
def test_25_uvicorn_workers_with_stores_of_their_own_are_warned_at_start_up(
    tmp_path: Path,
) -> None:
    import time

    from mrtr.server import generate_key

    log = tmp_path / "uvicorn.log"
    env = {**cli_env(), "MRTR_STATE_KEYS": generate_key()}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "examples.asgi_app:create_app", "--factory",
             "--workers", "2", "--port", str(free_port())], cwd=ROOT, env=env,
            stdout=subprocess.DEVNULL, stderr=out)
    warning = "this process was started by another (workers or a reloader) and its store is"
    try:
        deadline = time.monotonic() + 60
        while log.read_text().count(warning) < 2 and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            time.sleep(0.2)
    finally:
        stop(process)
    assert log.read_text().count(warning) == 2, log.read_text()
