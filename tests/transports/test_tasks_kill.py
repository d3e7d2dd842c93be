"""Kill test: tasks survive a SIGKILLed worker of `mrtr serve --workers 3` (shared SQLite store).

Tasks parked in input_required and tasks mid-run on the killed worker are answered and completed
through the others; none is lost and no `ctx.once` side effect runs twice (#14).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr import Context, Server
from mrtr.protocol import TASKS_EXTENSION
from mrtr.server import TaskPolicy, generate_key
from tests.stores.conftest import REDIS_SERVER, start_redis, stop_redis
from tests.transports.conftest import (
    cli_env,
    free_port,
    post_args,
    request,
    spawn_cli,
    stop,
    wait_ready,
)
from tests.transports.test_workers import serve_workers

app = Server("kill", tasks=TaskPolicy(lease=1.0, poll_interval_ms=100))
DAY = 86_400.0
CAPS = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {},
                                                       "extensions": {TASKS_EXTENSION: {}}}}


async def _effect(ctx: Context, n: int) -> int:
    assert ctx.store is not None
    return await ctx.store.add(f"effects:{n}", 1, expires=time.time() + DAY)


@app.tool(task="required")
async def slow_job(ctx: Context, n: int, seconds: float) -> str:
    """Does its side effect once, then works for `seconds`."""
    await ctx.once("effect", lambda: _effect(ctx, n))
    await asyncio.sleep(seconds)
    return f"slow {n} done"


@app.tool(task="required")
async def parked_job(ctx: Context, n: int) -> str:
    """Does its side effect once, then asks before finishing."""
    await ctx.once("effect", lambda: _effect(ctx, n))
    return f"parked {n} " + ("go" if await ctx.confirm(f"Finish {n}?", key="go") else "stop")


@app.tool()
async def effects(ctx: Context, n: int) -> int:
    """How many times task `n` ran its side effect."""
    assert ctx.store is not None
    return await ctx.store.add(f"effects:{n}", 0, expires=time.time() + DAY)


def post(url: str, method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    body = request(method, params, **CAPS)
    return httpx.post(url, timeout=20, **post_args(body, connection="close", **headers))


def task_call(url: str, method: str, task_id: str, **params: Any) -> dict[str, Any]:
    reply = post(url, method, {"taskId": task_id, **params}, mcp_name=task_id).json()
    assert "result" in reply, reply
    return reply["result"]  # type: ignore[no-any-return]


def settle(fleet: Fleet, task_ids: list[str], wanted: str, seconds: float) -> dict[str, Any]:
    """Poll tasks/get (on whichever worker answers) until every task reaches `wanted`."""
    deadline = time.monotonic() + seconds
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = {t: task_call(fleet.url(), "tasks/get", t) for t in task_ids}
        if all(task["status"] == wanted for task in last.values()):
            return last
        time.sleep(0.2)
    raise AssertionError(f"not all {wanted}: {[t['status'] for t in last.values()]}")


class Fleet:
    """Where to send each request, and how to kill the process running some tasks."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.turn = itertools.count()

    def url(self) -> str:
        return self.urls[next(self.turn) % len(self.urls)]


def run_scenario(create: Callable[[str, dict[str, Any]], tuple[str, str]],
                 kill: Callable[[set[str]], str], fleet: Fleet) -> None:
    """Create 6 slow and 3 parked tasks, kill the runner of some slow ones mid-run, answer the
    parked ones and check that every task completes with its side effect done exactly once."""
    runs_on: dict[str, str] = {}  # task id -> the process that created (runs) it
    slow, parked = [], []
    for n in range(9):
        name, args = ("slow_job", {"n": n, "seconds": 4.0}) if n < 6 else ("parked_job", {"n": n})
        task_id, runner = create(name, args)
        runs_on[task_id] = runner
        (slow if n < 6 else parked).append(task_id)
    settle(fleet, parked, "input_required", 20)
    killed = [t for t in slow if runs_on[t] == kill({runs_on[t] for t in slow})]
    assert killed  # tasks mid-run (they sleep 4 s) on the killed process
    for task_id in parked:  # answered through whichever process is alive
        key, = settle(fleet, [task_id], "input_required", 10)[task_id]["inputRequests"]
        task_call(fleet.url(), "tasks/update", task_id,
                  inputResponses={key: {"action": "accept", "content": {"confirm": True}}})
    done = settle(fleet, slow + parked, "completed", 45)
    texts = sorted(task["result"]["content"][0]["text"] for task in done.values())
    assert texts == sorted([f"slow {n} done" for n in range(6)]
                           + [f"parked {n} go" for n in range(6, 9)])
    for n in range(9):  # 0 side effects repeated: each ran exactly once
        counted = post(fleet.url(), "tools/call", {"name": "effects", "arguments": {"n": n}},
                       mcp_name="effects").json()["result"]
        assert counted["content"][0]["text"] == "1", (n, counted)



def took_over(logs: str) -> bool:
    """A live replica took the dead one's tasks over: on a client's request, or by the sweep
    (server/tasks/_sweep.py), whichever came first."""
    return ("taking over from a runner that died" in logs
            or "adopted by the sweep (its runner died)" in logs)

@pytest.mark.slow
def test_tasks_survive_a_sigkilled_worker(tmp_path: Path) -> None:
    url, process, log_path = serve_workers(tmp_path, "tests.transports.test_tasks_kill:app", 3)

    def create(name: str, args: dict[str, Any]) -> tuple[str, str]:
        response = post(url, "tools/call", {"name": name, "arguments": args}, mcp_name=name)
        created = response.json()["result"]
        assert created["resultType"] == "task", created
        return created["taskId"], response.headers["mcp-debug-worker"]

    def kill(pids: set[str]) -> str:
        victim = sorted(pids)[0]
        os.kill(int(victim), signal.SIGKILL)
        return victim

    try:
        wait_ready(url, process)
        run_scenario(create, kill, Fleet([url]))
        assert took_over(log_path.read_text())
    except AssertionError:
        print(log_path.read_text()[-4000:])
        raise
    finally:
        stop(process)


@pytest.mark.slow
@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
def test_tasks_survive_a_sigkilled_replica_with_redis(tmp_path: Path) -> None:
    redis, redis_url = start_redis(tmp_path)
    env = {**cli_env(), "MRTR_STATE_KEYS": generate_key(), "MRTR_STORE": redis_url}
    ports = [free_port() for _ in range(3)]
    replicas = []
    for index, port in enumerate(ports):
        with (tmp_path / f"replica{index}.log").open("wb") as log:
            replicas.append(spawn_cli("serve", "tests.transports.test_tasks_kill:app", "--port",
                                      str(port), "--log-level", "info",
                                      stdout=subprocess.DEVNULL, stderr=log, env=env))
    urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]

    def create(name: str, args: dict[str, Any]) -> tuple[str, str]:
        created = post(urls[0], "tools/call", {"name": name, "arguments": args},
                       mcp_name=name).json()["result"]
        assert created["resultType"] == "task", created
        return created["taskId"], "0"  # replica 0 creates and runs every task

    def kill(runners: set[str]) -> str:
        replicas[0].send_signal(signal.SIGKILL)
        replicas[0].wait(10)
        return "0"

    try:
        for url, replica in zip(urls, replicas, strict=True):
            wait_ready(url, replica)
        run_scenario(create, kill, Fleet(urls[1:]))
        logs = "".join((tmp_path / f"replica{i}.log").read_text() for i in (1, 2))
        assert took_over(logs), logs
    finally:
        for replica in replicas:
            stop(replica)
        stop_redis(redis)
