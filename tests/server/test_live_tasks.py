"""Live continuation, the task sweep and the cost of an idle task (#28, acceptance 1, 2, 5).

Real parts: uvicorn on 127.0.0.1 with httpx for the end-to-end run, SQLite files shared by two
replicas (Dispatchers, one store client each) for the sweep. Numbers are printed (`pytest -s`)
and repeated in the assertion messages.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from mrtr import Context, Form, Server
from mrtr.http import McpApp
from mrtr.protocol import TASKS_EXTENSION
from mrtr.server import Dispatcher, Sealer, TaskPolicy
from mrtr.stores import MemoryStore, SQLiteStore, Store
from tests.server.tasks_harness import Replica, accept
from tests.transports.conftest import LiveServer, headers_for, meta

STEPS = ["prep starters", "bake bread", "order produce", "plate desserts"]


class Go(Form):
    ok: bool


def kitchen(log: list[str], policy: TaskPolicy, step: float = 1.0) -> Server:
    app = Server("kitchen", tasks=policy)

    @app.tool(task="required")
    async def menu(ctx: Context) -> str:
        for n, name in enumerate(STEPS, 1):
            if n == 3:
                answer = await ctx.elicit("Order the produce?", Go, key="go")
                assert answer.ok
            log.append(name)
            await asyncio.sleep(step)
            await ctx.report_progress(n, len(STEPS), name)
        return "served"

    return app


def _body(method: str, params: dict[str, Any], n: int) -> dict[str, Any]:
    caps = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}
    return {"jsonrpc": "2.0", "id": n, "method": method,
            "params": {**params, "_meta": meta(**{
                "io.modelcontextprotocol/clientCapabilities": caps})}}


async def _post(client: httpx.AsyncClient, method: str, params: dict[str, Any],
                n: int) -> dict[str, Any]:
    body = _body(method, params, n)
    headers = headers_for(body)
    if "taskId" in params:
        headers["mcp-name"] = params["taskId"]
    reply = await client.post("/mcp", content=msgspec.json.encode(body), headers=headers)
    assert reply.status_code == 200, reply.text
    decoded: dict[str, Any] = reply.json()
    assert "result" in decoded, decoded
    return decoded["result"]  # type: ignore[no-any-return]


# -- acceptance 1: the 4-step task that asks halfway, over uvicorn + httpx ---------------------
def test_a_task_that_asks_halfway_goes_on_where_it_stopped() -> None:
    log: list[str] = []
    app = kitchen(log, TaskPolicy(poll_interval_ms=50))
    dispatcher = Dispatcher(app, store=MemoryStore())
    seen: list[tuple[str, str]] = []

    async def go(url: str) -> float:
        async with httpx.AsyncClient(base_url=url) as client:
            started = time.monotonic()
            task_id = (await _post(client, "tools/call", {"name": "menu", "arguments": {}},
                                   1))["taskId"]
            n = 2
            while True:
                n += 1
                task = await _post(client, "tasks/get", {"taskId": task_id}, n)
                seen.append((task["status"], task.get("statusMessage", "")))
                if task["status"] == "input_required":
                    (key,) = task["inputRequests"]
                    await _post(client, "tasks/update", {
                        "taskId": task_id, "inputResponses": {key: accept({"ok": True})}}, n)
                elif task["status"] in ("completed", "failed", "cancelled"):
                    assert task["status"] == "completed", task
                    return time.monotonic() - started
                await asyncio.sleep(0.05)

    with LiveServer(McpApp(dispatcher)) as server:
        took = asyncio.run(go(server.url))
    messages = [m for _, m in seen]
    order = ["Started.", *STEPS]
    ranks = [order.index(m) for m in messages]
    changes = [m for i, m in enumerate(messages) if i == 0 or m != messages[i - 1]]
    summary = (f"4 steps of 1 s, an ask after step 2, one replica: {took:.2f} s end to end; "
               f"steps run: {log}; status messages: {changes}")
    print("\n" + summary)
    assert log == STEPS, summary  # no step ran twice
    assert ranks == sorted(ranks), summary  # never backwards
    assert ("input_required", "bake bread") in seen, summary
    assert took < 4.8, summary


# -- acceptance 2: the sweep adopts, frees slots and purges, without any request ---------------
def _replicas(app: Server, path: Path, policy: TaskPolicy) -> list[Replica]:
    sealer = Sealer.ephemeral(audience=app.name)
    return [Replica(app, SQLiteStore(path), policy, sealer) for _ in range(2)]


def test_the_sweep_adopts_a_task_whose_runner_died(tmp_path: Path) -> None:
    log: list[str] = []
    policy = TaskPolicy(poll_interval_ms=10, lease=1.0)
    app = Server("sweep", tasks=policy)

    @app.tool(task="required")
    async def slow(ctx: Context) -> str:
        await ctx.once("step-1", lambda: log.append("step 1"))
        await asyncio.sleep(0.5)
        log.append("step 2")
        return "done"

    async def go() -> tuple[float, str, int]:
        a, b = _replicas(app, tmp_path / "s.db", policy)
        sweep = b.dispatcher.tasks.sweeping()
        assert sweep is not None
        try:
            task_id = (await a.call("slow", principal="p"))["taskId"]
            async with asyncio.timeout(5):
                while log != ["step 1"]:
                    await asyncio.sleep(0.01)
            a.dispatcher.tasks.stop(task_id, "lost")  # a dies: no end, no release, no renewal
            died = time.monotonic()
            sweep.start()
            book = b.dispatcher.tasks.book
            async with asyncio.timeout(2 * policy.lease + 1):
                while True:  # no tasks/get, no update: only the sweep moves it
                    record = await book.load(task_id)
                    if record is not None and record.terminal:
                        break
                    await asyncio.sleep(0.02)
            return time.monotonic() - died, record.status, await book.live("p")
        finally:
            await sweep.aclose()
            await _shut([a, b])

    took, status, live = asyncio.run(go())
    summary = (f"runner died after step 1, lease 1 s: adopted and {status} by the sweep "
               f"{took:.2f} s later; steps: {log}; slots held after: {live}")
    print("\n" + summary)
    assert status == "completed" and log == ["step 1", "step 2"], summary  # once: ran once
    assert took < 2 * policy.lease, summary
    assert live == 0, summary


def test_the_sweep_frees_the_slot_of_a_task_that_ended_and_purges_expired_records(
        tmp_path: Path) -> None:
    policy = TaskPolicy(poll_interval_ms=10, lease=0.5, ttl_ms=1500, sweep_every=0.2)
    app = Server("slots", tasks=policy)

    @app.tool(task="required")
    async def quick(ctx: Context) -> str:
        return "ok"

    async def go() -> tuple[int, int, int, int]:
        (a, b) = _replicas(app, tmp_path / "t.db", policy)
        runner = a.dispatcher.tasks
        sweep = b.dispatcher.tasks.sweeping()
        assert sweep is not None
        try:
            record = None
            task_id = (await a.call("quick", principal="p"))["taskId"]
            record = await runner.book.load(task_id)
            async with asyncio.timeout(5):  # it ends normally; then we re-create the crash:
                while record is None or not record.terminal:
                    record = await runner.book.load(task_id)
                    await asyncio.sleep(0.01)
            # a crash between its end and its slot: the slot taken again, the lease held
            assert await runner.book.admit("p", task_id, record.expires)
            assert await runner.book.acquire(record)
            held = await runner.book.live("p")
            sweep.start()
            await asyncio.sleep(0.5 + 0.2 + 0.3)  # the lease lapses, a sweep passes
            freed = await runner.book.live("p")
            await asyncio.sleep(1.0)  # past the TTL (1.5 s), another sweep passes
            rows = _rows(tmp_path / "t.db", task_id)
            return held, freed, rows, len(_tracked(tmp_path / "t.db"))
        finally:
            await sweep.aclose()
            await _shut([a, b])

    held, freed, rows, tracked = asyncio.run(go())
    summary = (f"task ended, slot and lease left behind: {held} slot held, {freed} after the "
               f"sweep; its rows in the SQLite file after the TTL: {rows}, leases tracked: "
               f"{tracked}")
    print("\n" + summary)
    assert held == 1 and freed == 0 and rows == 0 and tracked == 0, summary


def _rows(path: Path, task_id: str) -> int:
    with sqlite3.connect(path) as db:
        found = db.execute("SELECT count(*) FROM mrtr_entries WHERE key LIKE ?",
                           (f"%{task_id}%",)).fetchone()
    return int(found[0])


def _tracked(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [k for (k,) in db.execute("SELECT key FROM mrtr_leases")]


async def _shut(reps: list[Replica]) -> None:
    for rep in reps:
        runner = rep.dispatcher.tasks
        for task in list(runner.live.values()):
            task.cancel()
        await asyncio.gather(*runner.live.values(), return_exceptions=True)
        await runner.book.store.aclose()


# -- acceptance 5: an idle running task costs one store operation per lease/3 -------------------
class Counting:
    """A Store that counts the calls made to it (by name)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        inner = getattr(self.store, name)
        if name in ("wait", "aclose"):  # waiting on a channel is no store operation
            return inner

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return inner(*args, **kwargs)

        return counted


def test_an_idle_running_task_costs_one_store_operation_per_renewal(tmp_path: Path) -> None:
    lease = 3.0  # renewals every lease/3 = 1 s; at the default lease (30 s): every 10 s
    policy = TaskPolicy(poll_interval_ms=10, lease=lease)
    app = Server("idle", tasks=policy)

    @app.tool(task="required")
    async def idle(ctx: Context) -> str:
        await asyncio.sleep(60)
        return "woke"

    async def go(store: Store) -> tuple[list[str], float]:
        counting = Counting(store)
        rep = Replica(app, counting, policy)  # type: ignore[arg-type]
        try:
            await rep.call("idle")
            await asyncio.sleep(0.2)  # creation done
            counting.calls.clear()
            started = time.monotonic()
            await asyncio.sleep(4.5)
            return list(counting.calls), time.monotonic() - started
        finally:
            await _shut([rep])

    for store in (MemoryStore(), SQLiteStore(tmp_path / "idle.db")):
        calls, window = asyncio.run(go(store))
        per_ten = len(calls) / (window / (lease / 3))  # per renewal interval: 10 s by default
        summary = (f"{type(store).__name__}: an idle task made {len(calls)} store calls in "
                   f"{window:.1f} s with renewals every {lease / 3:.0f} s ({calls}): "
                   f"{per_ten:.2f} per 10 s at the default lease of 30 s")
        print("\n" + summary)
        assert set(calls) <= {"renew"}, summary
        assert len(calls) <= window / (lease / 3) + 0.5, summary
        assert per_ten <= 1.0, summary


# -- acceptance 1, second half: the owner SIGKILLed after the ask, another replica replays ------
@pytest.mark.slow
def test_a_task_whose_replica_was_killed_after_the_ask_is_finished_by_replay(
        tmp_path: Path) -> None:
    from mrtr.server import generate_key
    from tests.transports.conftest import cli_env, free_port, spawn_cli, stop, wait_ready

    env = {**cli_env(), "MRTR_STATE_KEYS": generate_key(), "LIVE_DIR": str(tmp_path),
           "LIVE_STORE": f"sqlite://{tmp_path}/store.db"}
    ports = [free_port(), free_port()]
    logs = [(tmp_path / f"replica{i}.log").open("ab") for i in range(2)]
    procs = [spawn_cli("serve", "tests.server.live_app:dispatcher", "--port", str(port),
                       "--log-level", "warning", stdout=subprocess.DEVNULL, stderr=log, env=env)
             for port, log in zip(ports, logs, strict=True)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for url, proc in zip(urls, procs, strict=True):
            wait_ready(url + "/mcp", proc)

        async def go() -> str:
            async with httpx.AsyncClient(base_url=urls[0]) as a, \
                    httpx.AsyncClient(base_url=urls[1]) as b:
                task_id = (await _post(a, "tools/call", {"name": "menu", "arguments": {}},
                                       1))["taskId"]
                async with asyncio.timeout(20):
                    while (await _post(a, "tasks/get", {"taskId": task_id}, 2))[
                            "status"] != "input_required":
                        await asyncio.sleep(0.05)
                    os.kill(procs[0].pid, signal.SIGKILL)  # the owner dies, waiting live
                    procs[0].wait(10)
                    await _post(b, "tasks/update", {"taskId": task_id, "inputResponses": {
                        "go": accept({"ok": True})}}, 3)
                    while True:
                        task = await _post(b, "tasks/get", {"taskId": task_id}, 4)
                        if task["status"] in ("completed", "failed", "cancelled"):
                            return str(task["status"])
                        await asyncio.sleep(0.1)

        status = asyncio.run(go())
    finally:
        for proc in procs:
            stop(proc)
        for log in logs:
            log.close()
    ran = [" ".join(line.split()[:-1]) for line in (tmp_path / "steps.log").read_text().split(
        "\n") if line]
    pids = {line.split()[-1] for line in (tmp_path / "steps.log").read_text().split("\n") if line}
    summary = f"owner SIGKILLed after the ask: {status} on the other replica; steps run: {ran}"
    print("\n" + summary)
    assert status == "completed", summary
    assert ran == STEPS, summary  # each ctx.once step ran once, across both processes
    assert len(pids) == 2, summary  # the first two on the killed owner, the rest elsewhere
