"""Tasks on every Store (Memory, SQLite, a real redis-server): slots, ends and cancels (#25).

Each test runs replicas (Dispatchers) on one shared store: one MemoryStore object, one SQLite
file opened by a client per replica, one Redis reached by a client per replica. The counts are
printed (`pytest -s`) and repeated in the assertion messages.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from mrtr import Context, Form, Server
from mrtr.server import TaskPolicy
from mrtr.stores import Store, StoreUnavailable
from tests.server.tasks_harness import Replica
from tests.stores.conftest import Factory


class Confirm(Form):
    ok: bool


def tasks_app(policy: TaskPolicy) -> tuple[Server, list[str]]:
    """A server with task tools; `log` records what their handlers did."""
    app = Server("contract", tasks=policy)
    log: list[str] = []

    @app.tool(task="required")
    async def hold(ctx: Context) -> str:
        await asyncio.sleep(60)
        return "held"

    @app.tool(task="required")
    async def quick(ctx: Context, pause: float = 0.0) -> str:
        await asyncio.sleep(pause)
        return "done"

    @app.tool(task="required")
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Go on?", Confirm, key="go")
        return f"go={answer.ok}"

    @app.tool(task="required")
    async def two_steps(ctx: Context) -> str:
        await ctx.once("step-1", lambda: log.append(f"step 1 {ctx.task_id}"))
        await ctx.report_progress(1, 2, "step 1 done")
        try:
            await asyncio.sleep(60)  # step 2 waits: a cancel must stop it here
        except asyncio.CancelledError:
            log.append(f"cancelled {ctx.task_id}")
            raise
        log.append(f"step 2 {ctx.task_id}")
        return "finished"

    return app, log


def replicas(app: Server, make: Factory, n: int) -> list[Replica]:
    return [Replica(app, make(), app.tasks) for _ in range(n)]


async def shut(reps: list[Replica]) -> None:
    """Stop every coroutine still running a task, then close each store client once."""
    for rep in reps:
        runner = rep.dispatcher.tasks
        for task in list(runner.live.values()):
            task.cancel()
        await asyncio.gather(*runner.live.values(), return_exceptions=True)
    closed: set[int] = set()
    for rep in reps:
        store = rep.dispatcher.tasks.book.store
        if id(store) not in closed:
            closed.add(id(store))
            await store.aclose()


# -- max_live holds under concurrent creations ---------------------------------------------------
def test_max_live_holds_under_concurrent_creations_on_three_replicas(make_store: Factory) -> None:
    app, _ = tasks_app(TaskPolicy(max_live=100, poll_interval_ms=10, lease=0.6))

    async def go() -> tuple[int, int, int, str]:
        reps = replicas(app, make_store, 3)
        try:
            book = reps[0].dispatcher.tasks.book
            outs = await asyncio.gather(*(reps[n % 3].call("hold", principal="p")
                                          for n in range(300)))
            created = [o["taskId"] for o in outs if o.get("resultType") == "task"]
            refused = sum(1 for o in outs if o.get("isError"))
            live = await book.live("p")
            for task_id in created[:10]:  # ten end: ten slots come back, no more
                await reps[1].cancel(task_id, principal="p")
            for task_id in created[:10]:
                await reps[2].wait(task_id, "cancelled", principal="p")
            after = [await reps[n % 3].call("hold", principal="p") for n in range(12)]
            again = sum(1 for o in after if o.get("resultType") == "task")
            return len(created), refused, live, f"{type(book.store).__name__}, again {again}"
        finally:
            await shut(reps)

    created, refused, live, detail = asyncio.run(go())
    summary = (f"max_live 100, 300 concurrent creations on 3 replicas: {created} created, "
               f"{refused} refused, {live} live ({detail}/12 after 10 cancels)")
    print("\n" + summary)
    assert (created, refused, live) == (100, 200, 100), summary
    assert detail.endswith("again 10"), summary


# -- terminal states are final -------------------------------------------------------------------
def test_cancel_racing_completion_never_changes_an_ended_task(make_store: Factory) -> None:
    app, _ = tasks_app(TaskPolicy(poll_interval_ms=10, lease=0.6, hold=0))
    races, batch = 1000, 50
    rng = random.Random(25)

    async def race(a: Replica, b: Replica, n: int) -> tuple[str, bool]:
        pause = rng.choice((0.0, 0.0, 0.001, 0.002, 0.004))
        task_id = (await a.call("quick", {"pause": pause}))["taskId"]
        await asyncio.sleep(rng.choice((0.0, 0.0005, 0.001, 0.002, 0.003, 0.005)))
        await (a if n % 2 else b).cancel(task_id)  # cancelled where it runs, or elsewhere
        seen = (await b.get(task_id))["result"]  # the state right after the cancel's ack
        final = await a.wait(task_id, "completed", "cancelled", "failed")
        for _ in range(3):  # settle every straggler, then look again
            await asyncio.sleep(0.01)
        await b.cancel(task_id)  # a late cancel changes nothing
        last = (await b.get(task_id))["result"]
        flipped = (seen["status"] in ("completed", "cancelled", "failed")
                   and seen["status"] != last["status"]) or final["status"] != last["status"]
        wrong = ((last["status"] == "cancelled" and "result" in last)
                 or (last["status"] == "completed" and "result" not in last))
        return last["status"], flipped or wrong

    async def go() -> tuple[dict[str, int], int, int, str]:
        a, b = replicas(app, make_store, 2)
        try:
            outcomes: list[tuple[str, bool]] = []
            for start in range(0, races, batch):
                outcomes += await asyncio.gather(*(race(a, b, n)
                                                   for n in range(start, start + batch)))
            await asyncio.sleep(0.05)
            statuses: dict[str, int] = {}
            for status, _ in outcomes:
                statuses[status] = statuses.get(status, 0) + 1
            flips = sum(1 for _, bad in outcomes if bad)
            live = await a.dispatcher.tasks.book.live(None)
            return statuses, flips, live, type(a.dispatcher.tasks.book.store).__name__
        finally:
            await shut([a, b])

    statuses, flips, live, name = asyncio.run(go())
    summary = (f"{races} cancel-vs-complete races ({name}): {statuses}, {flips} flips, "
               f"{live} slots left")
    print("\n" + summary)
    assert sum(statuses.values()) == races and flips == 0 and live == 0, summary
    assert statuses.get("failed", 0) == 0, summary


# -- a cancel through another replica reaches the running handler -------------------------------
def test_a_running_task_sees_a_cancel_made_through_another_replica(make_store: Factory) -> None:
    app, log = tasks_app(TaskPolicy(poll_interval_ms=10, lease=0.6))

    async def go() -> tuple[dict[str, Any], float, bool, str]:
        a, b = replicas(app, make_store, 2)
        try:
            task_id = (await a.call("two_steps"))["taskId"]
            seen = await b.wait(task_id, "working")
            async with asyncio.timeout(5):  # the handler is past its first step, in step 2
                while seen.get("statusMessage") != "step 1 done":
                    await asyncio.sleep(0.01)
                    seen = (await b.get(task_id))["result"]
            assert task_id in a.dispatcher.tasks.live and not b.dispatcher.tasks.live
            assert log == [f"step 1 {task_id}"]
            started = time.monotonic()
            await b.cancel(task_id)  # b does not run it: a must see the flag while it runs
            done = await b.wait(task_id, "cancelled", "completed", timeout=10)
            took = time.monotonic() - started
            # a sees it when rung (Memory: one process; Redis: pub/sub), else at its next
            # renewal (lease/3: the cancel broke its lease), without polling the flag (#28)
            async with asyncio.timeout(1):
                while a.dispatcher.tasks.live:
                    await asyncio.sleep(0.01)
            name = type(a.dispatcher.tasks.book.store).__name__
            return done, took, bool(a.dispatcher.tasks.live), name
        finally:
            await shut([a, b])

    done, took, still_running, name = asyncio.run(go())
    events = [" ".join(line.split()[:-1]) for line in log]  # without the task id
    summary = (f"cancel through another replica after step 1 ({name}): {done['status']} in "
               f"{took:.2f} s; the handler: {events}")
    print("\n" + summary)
    assert done["status"] == "cancelled" and "result" not in done, summary
    assert events == ["step 1", "cancelled"], summary
    assert not still_running and took < 3, summary


# -- slots come back ------------------------------------------------------------------------------
def test_expired_parked_tasks_free_their_slots(make_store: Factory) -> None:
    app, _ = tasks_app(TaskPolicy(ttl_ms=1000, max_live=2, poll_interval_ms=10, lease=0.6))

    async def go() -> tuple[int, int, int, int, bool, str]:
        (a,) = replicas(app, make_store, 1)
        try:
            book = a.dispatcher.tasks.book
            parked = [(await a.call("ask", principal="p"))["taskId"] for _ in range(2)]
            for task_id in parked:
                await a.wait(task_id, "input_required", principal="p")
            started, refused = time.monotonic(), 0
            while time.monotonic() - started < 0.6:  # refused attempts while they live
                refused += bool((await a.call("ask", principal="p")).get("isError"))
                await asyncio.sleep(0.05)
            full = await book.live("p")
            await asyncio.sleep(max(0.0, 1.2 - (time.monotonic() - started)))  # past the TTL
            freed = await book.live("p")
            fresh = await a.call("ask", principal="p")
            gone = (await a.get(parked[0], principal="p"))["error"]["code"]
            return (refused, full, freed, gone, fresh.get("resultType") == "task",
                    type(book.store).__name__)
        finally:
            await shut([a])

    refused, full, freed, gone, created, name = asyncio.run(go())
    summary = (f"2 parked tasks, TTL 1 s, cap 2 ({name}): {refused} refused while live, "
               f"{full} slots then, {freed} after the TTL, new task created: {created}")
    print("\n" + summary)
    assert refused >= 5 and full == 2 and freed == 0 and created and gone == -32602, summary


class FailingRecords:
    """Wraps a Store; writing a task record fails (StoreUnavailable) while `failing`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.failing = True
        self.failed = 0

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        if self.failing and key.startswith("task:") and key.count(":") == 1:
            self.failed += 1
            raise StoreUnavailable("injected: the task record cannot be written")
        await self.store.complete(key, outcome, expires=expires)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_failed_creations_never_consume_a_slot(make_store: Factory) -> None:
    app, _ = tasks_app(TaskPolicy(max_live=3, poll_interval_ms=10, lease=0.6))

    async def go() -> tuple[int, int, int, int, str]:
        store = FailingRecords(make_store())
        rep = Replica(app, store, app.tasks)  # type: ignore[arg-type]
        try:
            book = rep.dispatcher.tasks.book
            errors = 0
            for _ in range(100):
                reply = await rep.send("tools/call", {"name": "quick", "arguments": {}},
                                       principal="p")
                errors += reply.get("error", {}).get("code") == -32603
            left = await book.live("p")
            store.failing = False
            made = [await rep.call("hold", principal="p") for _ in range(4)]
            return (errors, store.failed, left, sum(1 for m in made if m.get("resultType") ==
                                                    "task"), type(store.store).__name__)
        finally:
            await shut([rep])

    errors, failed, left, created, name = asyncio.run(go())
    summary = (f"100 failed task creations ({name}): {errors} answered -32603, {failed} record "
               f"writes refused, {left} slots left; then {created} of 4 created with cap 3")
    print("\n" + summary)
    assert (errors, failed, left, created) == (100, 100, 0, 3), summary
