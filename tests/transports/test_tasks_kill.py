"""Kill test: tasks survive a SIGKILLed worker of `mrtr serve --workers 3` (shared SQLite store).

Tasks parked in input_required and tasks mid-run on the killed worker are answered and completed
through the others; none is lost and no `ctx.once` side effect runs twice (#14).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr import Context, Server
from mrtr.protocol import TASKS_EXTENSION
from mrtr.server import TaskPolicy
from tests.transports.conftest import post_args, request, stop, wait_ready
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


def settle(url: str, task_ids: list[str], wanted: str, seconds: float) -> dict[str, Any]:
    """Poll tasks/get (on whichever worker answers) until every task reaches `wanted`."""
    deadline = time.monotonic() + seconds
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = {t: task_call(url, "tasks/get", t) for t in task_ids}
        if all(task["status"] == wanted for task in last.values()):
            return last
        time.sleep(0.2)
    raise AssertionError(f"not all {wanted}: {[t['status'] for t in last.values()]}")


@pytest.mark.slow
def test_tasks_survive_a_sigkilled_worker(tmp_path: Path) -> None:
    url, process, log_path = serve_workers(tmp_path, "tests.transports.test_tasks_kill:app", 3)
    try:
        wait_ready(url, process)
        runs_on: dict[str, str] = {}  # task id -> pid of the worker that created (runs) it
        slow, parked = [], []
        for n in range(9):
            name, args = ("slow_job", {"n": n, "seconds": 4.0}) if n < 6 else ("parked_job",
                                                                                 {"n": n})
            response = post(url, "tools/call", {"name": name, "arguments": args},
                            mcp_name=name)
            created = response.json()["result"]
            assert created["resultType"] == "task", created
            runs_on[created["taskId"]] = response.headers["mcp-debug-worker"]
            (slow if n < 6 else parked).append(created["taskId"])
        settle(url, parked, "input_required", 20)
        # The victim runs at least one slow task, now mid-run (they sleep 4 s).
        victim = max({runs_on[t] for t in slow}, key=lambda pid: sum(
            runs_on[t] == pid for t in slow))
        os.kill(int(victim), signal.SIGKILL)
        killed = [t for t in slow if runs_on[t] == victim]
        assert killed
        for task_id in parked:  # answered through whichever worker is alive
            key, = settle(url, [task_id], "input_required", 10)[task_id]["inputRequests"]
            task_call(url, "tasks/update", task_id,
                      inputResponses={key: {"action": "accept", "content": {"confirm": True}}})
        done = settle(url, slow + parked, "completed", 45)
        texts = sorted(task["result"]["content"][0]["text"] for task in done.values())
        assert texts == sorted([f"slow {n} done" for n in range(6)]
                               + [f"parked {n} go" for n in range(6, 9)])
        for n in range(9):  # 0 side effects repeated: each ran exactly once
            counted = post(url, "tools/call", {"name": "effects", "arguments": {"n": n}},
                           mcp_name="effects").json()["result"]
            assert counted["content"][0]["text"] == "1", (n, counted)
        assert "taking over from a runner that died" in log_path.read_text()
    except AssertionError:
        print(log_path.read_text()[-4000:])
        raise
    finally:
        stop(process)
