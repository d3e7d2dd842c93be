"""Tasks extension, server side: creation, tasks/get|update|cancel, parking, composition (#14)."""

from __future__ import annotations

import asyncio
from typing import Any

from mrtr import Context, Form, InvalidParams, Server, ToolError
from mrtr.protocol import TASKS_EXTENSION
from mrtr.server.sessions._session import session_capabilities
from tests.server.tasks_harness import Replica, accept, pair

app = Server("tasks")
RAN: list[str] = []


class Name(Form):
    name: str


@app.tool()
def plain(name: str) -> str:
    return f"Hello, {name}!"


@app.tool(task="optional")
async def slow(ctx: Context, seconds: float = 0.0) -> str:
    await ctx.report_progress(1, 2, "halfway")
    await asyncio.sleep(seconds)
    return f"slept {seconds:g}"


@app.tool(task="required")
async def fails_as_tool() -> str:
    raise ToolError("broken on purpose")


@app.tool(task="optional")
async def fails_as_protocol() -> str:
    raise InvalidParams("no such thing")


@app.tool(task="optional")
async def confirm(ctx: Context, what: str) -> str:
    await ctx.once("side", lambda: _prepare(what))
    return f"deleted {what}" if await ctx.confirm(f"Delete {what}?") else f"kept {what}"


def _prepare(what: str) -> str:
    RAN.append(f"prepared {what}")  # the side effect: must happen once per task
    return what


@app.tool(task="optional")
async def two(ctx: Context) -> str:
    a, b = await ctx.gather(ctx.elicit("A?", Name, key="a"), ctx.elicit("B?", Name, key="b"))
    return f"{a.name}+{b.name}"


@app.tool(task="required")
async def composed(ctx: Context) -> str:
    who = await ctx.elicit("Name?", Name)
    await ctx.begin_task()
    return f"Hello {who.name} from a task"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_discover_advertises_the_extension() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        caps = (await a.send("server/discover"))["result"]["capabilities"]
        assert caps["extensions"] == {TASKS_EXTENSION: {}} and "tasks" not in caps
        bare = Replica(Server("bare"), a.dispatcher.tasks.book.store)
        assert "extensions" not in (await bare.send("server/discover"))["result"]["capabilities"]
    run(go())


def test_create_task_result_is_flat_and_durable() -> None:
    async def go() -> None:
        a, b, _ = pair(app)
        created = await a.call("slow", {"seconds": 0.2})
        assert created["resultType"] == "task" and created["status"] == "working"
        assert created["ttlMs"] > 0 and created["pollIntervalMs"] == 10
        for absent in ("task", "result", "error", "inputRequests", "requestState"):
            assert absent not in created
        got = (await b.get(created["taskId"]))["result"]  # another replica resolves it at once
        assert got["taskId"] == created["taskId"] and got["resultType"] == "complete"
        done = await b.wait(created["taskId"], "completed")
        assert done["result"]["content"][0]["text"] == "slept 0.2"
        assert done["statusMessage"] == "halfway"
    run(go())


def test_optional_task_tool_is_sync_for_a_client_without_the_extension() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        result = await a.call("slow", tasks=False)
        assert result["resultType"] == "complete" and "taskId" not in result
        assert (await a.call("plain", {"name": "x"}))["resultType"] == "complete"
    run(go())


def test_required_task_tool_without_the_extension_is_32021() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        reply = await a.send("tools/call", {"name": "fails_as_tool", "arguments": {}},
                             tasks=False)
        assert reply["error"]["code"] == -32021
        assert reply["error"]["data"] == {"requiredCapabilities": {"extensions":
                                                                   {TASKS_EXTENSION: {}}}}
    run(go())


def test_tasks_methods_need_the_extension_and_removed_ones_are_gone() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        task_id = (await a.call("slow"))["taskId"]
        for method in ("tasks/get", "tasks/cancel"):
            reply = await a.send(method, {"taskId": task_id}, tasks=False)
            assert reply["error"]["code"] == -32021, method
        reply = await a.send("tasks/update", {"taskId": task_id, "inputResponses": {}},
                             tasks=False)
        assert reply["error"]["code"] == -32021
        for method in ("tasks/result", "tasks/list"):
            assert (await a.send(method, {"taskId": task_id}))["error"]["code"] == -32601
    run(go())


def test_completed_inlines_an_error_result_and_failed_inlines_the_error() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        done = await a.wait((await a.call("fails_as_tool"))["taskId"], "completed", "failed")
        assert done["status"] == "completed" and done["result"]["isError"] is True
        failed = await a.wait((await a.call("fails_as_protocol"))["taskId"], "completed",
                              "failed")
        assert failed["status"] == "failed" and "result" not in failed
        assert failed["error"]["code"] == -32602 and "message" in failed["error"]
    run(go())


def test_unknown_and_foreign_task_ids_are_the_same_32602() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        task_id = (await a.call("slow", principal="alice"))["taskId"]
        assert "result" in await a.get(task_id, principal="alice")
        unknown = await a.get("no-such-task", principal="alice")
        foreign = await a.get(task_id, principal="mallory")
        assert unknown["error"] == foreign["error"] and foreign["error"]["code"] == -32602
        for reply in (await a.cancel(task_id, principal="mallory"),
                      await a.update(task_id, {}, principal="mallory")):
            assert reply["error"]["code"] == -32602
        assert (await a.wait(task_id, "completed", principal="alice"))["status"] == "completed"
    run(go())


def test_a_parked_task_is_answered_through_another_replica() -> None:
    async def go() -> None:
        RAN.clear()
        a, b, _ = pair(app)
        task_id = (await a.call("confirm", {"what": "f.txt"}))["taskId"]
        parked = await a.wait(task_id, "input_required")
        (key, request), = parked["inputRequests"].items()
        assert request["method"] == "elicitation/create" and "requestState" not in parked
        assert not a.dispatcher.tasks.live  # parked: no coroutine kept
        ack = await b.update(task_id, {key: accept({"confirm": True}), "nope": accept({})})
        assert ack["result"] == {"resultType": "complete", "_meta": ack["result"]["_meta"]}
        done = await b.wait(task_id, "completed")
        assert done["result"]["content"][0]["text"] == "deleted f.txt"
        assert RAN == ["prepared f.txt"]  # replayed from the journal, not run again
        assert b.dispatcher.tasks.book.store is a.dispatcher.tasks.book.store
    run(go())


def test_partial_update_leaves_only_the_unanswered_key() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        task_id = (await a.call("two"))["taskId"]
        parked = await a.wait(task_id, "input_required")
        assert sorted(parked["inputRequests"]) == ["a", "b"]
        await a.update(task_id, {"a": accept({"name": "x"})})
        still = (await a.get(task_id))["result"]
        assert still["status"] == "input_required" and list(still["inputRequests"]) == ["b"]
        await a.update(task_id, {"b": accept({"name": "y"}), "a": accept({"name": "late"})})
        done = await a.wait(task_id, "completed")
        assert done["result"]["content"][0]["text"] == "x+y"
    run(go())


def test_an_invalid_answer_is_asked_again_under_a_new_key() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        task_id = (await a.call("two"))["taskId"]
        await a.wait(task_id, "input_required")
        await a.update(task_id, {"a": accept({"name": 5}), "b": {"not": "an elicit result"}})
        for _ in range(200):
            again = (await a.get(task_id))["result"]
            if again["status"] == "input_required":
                break
            await asyncio.sleep(0.01)
        assert sorted(again["inputRequests"]) == ["a.2", "b.2"]  # keys never reused
        await a.update(task_id, {"a.2": accept({"name": "p"}), "b.2": accept({"name": "q"})})
        assert (await a.wait(task_id, "completed"))["result"]["content"][0]["text"] == "p+q"
    run(go())


def test_malformed_input_responses_are_32602() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        task_id = (await a.call("two"))["taskId"]
        for bad in ({"a": "yes"}, ["a"], None):
            reply = await a.send("tasks/update", {"taskId": task_id, "inputResponses": bad})
            assert reply["error"]["code"] == -32602, bad
    run(go())


def test_update_after_terminal_is_acked_and_ignored() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        task_id = (await a.call("slow"))["taskId"]
        done = await a.wait(task_id, "completed")
        ack = await a.update(task_id, {"x": accept({"confirm": True})})
        assert ack["result"]["resultType"] == "complete"
        assert (await a.get(task_id))["result"] == done
    run(go())


def test_cancel_mid_run_settles_cancelled_and_cancel_after_is_the_same_ack() -> None:
    async def go() -> None:
        a, b, _ = pair(app)
        task_id = (await a.call("slow", {"seconds": 30}))["taskId"]
        ack = await a.cancel(task_id)
        assert set(ack["result"]) == {"resultType", "_meta"}
        assert (await b.wait(task_id, "cancelled"))["status"] == "cancelled"
        assert (await a.cancel(task_id))["result"] == ack["result"]
        finished = (await a.call("slow"))["taskId"]
        await a.wait(finished, "completed")
        assert "result" in await a.cancel(finished)
        assert (await a.get(finished))["result"]["status"] == "completed"
    run(go())


def test_cancel_through_another_replica_stops_the_runner() -> None:
    async def go() -> None:
        a, b, _ = pair(app)
        task_id = (await a.call("slow", {"seconds": 30}))["taskId"]
        async with asyncio.timeout(5):  # past its first step: the handler is in its sleep
            while (await b.get(task_id))["result"].get("statusMessage") != "halfway":
                await asyncio.sleep(0.01)
        await b.cancel(task_id)  # b does not run it: a's heartbeat sees the flag
        assert (await b.wait(task_id, "cancelled"))["status"] == "cancelled"
        await asyncio.sleep(0.05)
        assert not a.dispatcher.tasks.live
    run(go())


def test_cancel_of_a_parked_task() -> None:
    async def go() -> None:
        a, b, _ = pair(app)
        task_id = (await a.call("confirm", {"what": "g"}))["taskId"]
        await a.wait(task_id, "input_required")
        await b.cancel(task_id)
        assert (await a.get(task_id))["result"]["status"] == "cancelled"
    run(go())


def test_mrtr_rounds_compose_before_the_task() -> None:
    async def go() -> None:
        a, b, _ = pair(app)
        first = await a.call("composed")
        assert first["resultType"] == "input_required" and "taskId" not in first
        (key,) = first["inputRequests"]
        created = await b.send(
            "tools/call", {"name": "composed", "arguments": {},
                           "inputResponses": {key: accept({"name": "Alice"})},
                           "requestState": first["requestState"]})
        task = created["result"]
        assert task["resultType"] == "task" and "requestState" not in task
        assert "inputRequests" not in task
        done = await a.wait(task["taskId"], "completed")
        assert done["result"]["content"][0]["text"] == "Hello Alice from a task"
    run(go())


def test_a_principal_over_its_cap_gets_a_clear_error_result() -> None:
    from mrtr.server import TaskPolicy

    capped = Server("capped", tasks=TaskPolicy(max_live=2, poll_interval_ms=10, lease=0.6))
    capped.tool(task="optional")(slow)

    async def go() -> None:
        a, _, _ = pair(capped, capped.tasks)
        ids = [(await a.call("slow", {"seconds": 30}, principal="p"))["taskId"]
               for _ in range(2)]
        over = await a.call("slow", {"seconds": 30}, principal="p")
        assert over["isError"] is True and "limit 2" in over["content"][0]["text"]
        other = await a.call("slow", {"seconds": 30}, principal="q")  # caps are per principal
        assert other["resultType"] == "task"
        await a.cancel(ids[0], principal="p")
        await a.wait(ids[0], "cancelled", principal="p")
        assert (await a.call("slow", principal="p"))["resultType"] == "task"
        for task_id, who in ((ids[1], "p"), (other["taskId"], "q")):
            await a.cancel(task_id, principal=who)
    run(go())


def test_anonymous_callers_share_a_cap_of_their_own() -> None:
    from mrtr.server import TaskPolicy

    capped = Server("anon", tasks=TaskPolicy(max_live=1, max_live_anonymous=3,
                                             poll_interval_ms=10, lease=0.6))
    capped.tool(task="optional")(slow)
    closed = Server("closed", tasks=TaskPolicy(max_live_anonymous=0, lease=0.6))
    closed.tool(task="optional")(slow)

    async def go() -> None:
        a, _, _ = pair(capped, capped.tasks)
        made = [await a.call("slow", {"seconds": 30}) for _ in range(4)]
        assert [m["resultType"] for m in made[:3]] == ["task"] * 3
        assert made[3]["isError"] is True and "limit 3" in made[3]["content"][0]["text"]
        mine = await a.call("slow", {"seconds": 30}, principal="p")  # not in the anonymous pool
        assert mine["resultType"] == "task"
        assert (await a.call("slow", {"seconds": 30}, principal="p"))["isError"] is True
        c, _, _ = pair(closed, closed.tasks)
        refused = await c.call("slow", {"seconds": 30})
        assert refused["isError"] is True and "authenticated" in refused["content"][0]["text"]
        assert (await c.call("slow", principal="q"))["resultType"] == "task"
        for replica in (a, c):
            for task in list(replica.dispatcher.tasks.live.values()):
                task.cancel()
    run(go())


def test_a_task_whose_runner_died_is_resumed_elsewhere_without_repeating_once() -> None:
    async def go() -> None:
        RAN.clear()
        a, b, _ = pair(app)
        task_id = (await a.call("confirm", {"what": "h"}))["taskId"]
        await a.wait(task_id, "input_required")
        assert RAN == ["prepared h"]
        # a takes the answer and dies mid-run: its coroutine stops, the lease is not released.
        runner = a.dispatcher.tasks
        runner.invoke = lambda entry, ctx, arguments: asyncio.sleep(60)  # hangs mid-run
        await a.update(task_id, {"confirm-1": accept({"confirm": True})})
        await asyncio.sleep(0.05)
        assert task_id in runner.live
        runner.stop(task_id, "lost")
        await asyncio.sleep(0)
        done = await b.wait(task_id, "completed")  # b takes over once the lease lapses
        assert done["result"]["content"][0]["text"] == "deleted h"
        assert RAN == ["prepared h"]  # the new runner replays it from the store
    run(go())


def test_session_clients_never_get_the_extension() -> None:
    caps = session_capabilities("2025-11-25", {"extensions": {TASKS_EXTENSION: {}},
                                               "elicitation": {}})
    assert "extensions" not in caps and "elicitation" in caps


def test_a_terminal_task_is_readable_until_its_ttl_then_unknown() -> None:
    import time

    from mrtr.server import TaskPolicy
    from mrtr.stores import MemoryStore

    offset = [0.0]
    store = MemoryStore(clock=lambda: time.time() + offset[0])
    short = Server("short", tasks=TaskPolicy(ttl_ms=60_000, poll_interval_ms=10))
    short.tool(task="optional")(slow)

    async def go() -> None:
        a = Replica(short, store, short.tasks)
        created = await a.call("slow")
        assert created["ttlMs"] == 60_000
        await a.wait(created["taskId"], "completed")
        offset[0] = 50.0  # inside the TTL: still there
        assert (await a.get(created["taskId"]))["result"]["status"] == "completed"
        offset[0] = 61.0  # past it: gone, like an unknown id
        assert (await a.get(created["taskId"]))["error"]["code"] == -32602
    run(go())


def test_arguments_are_checked_before_a_task_is_created() -> None:
    async def go() -> None:
        a, _, _ = pair(app)
        bad = await a.call("slow", {"seconds": "soon"})
        assert bad["resultType"] == "complete" and bad["isError"] is True
    run(go())


def test_a_replayed_last_mrtr_round_returns_the_same_task() -> None:
    # With a store each round is single-use: the round that created the task replays its
    # CreateTaskResult instead of creating a second task (or failing to decode the first).
    async def go() -> None:
        a, b, _ = pair(app)
        first = await a.call("composed")
        (key,) = first["inputRequests"]
        retry = {"name": "composed", "arguments": {}, "requestState": first["requestState"],
                 "inputResponses": {key: accept({"name": "Ann"})}}
        created = (await a.send("tools/call", retry))["result"]
        again = (await b.send("tools/call", retry))["result"]
        assert again["resultType"] == "task" and again["taskId"] == created["taskId"]
        assert (await a.wait(created["taskId"], "completed"))["status"] == "completed"
    run(go())


def test_begin_task_is_found_in_nested_code_and_absent_means_a_task_at_once() -> None:
    local = Server("local")

    @local.tool(task="optional")
    async def nested(ctx: Context) -> str:
        async def later() -> None:
            await ctx.begin_task()
        await later()
        return "x"

    @local.tool(task="optional")
    async def at_once() -> str:
        return "y"

    assert local.tables.tools["nested"].task_later
    assert not local.tables.tools["at_once"].task_later


def test_27_a_new_task_says_it_started_before_any_progress() -> None:
    # Before: no statusMessage until the first progress report, so `on_task` printed UNSET.
    async def go() -> None:
        a, b, _ = pair(app)
        created = await a.call("confirm", {"what": "x"})
        assert created["statusMessage"] == "Started."
        parked = await b.wait(created["taskId"], "input_required")
        assert parked["statusMessage"] == "Started."
    run(go())
