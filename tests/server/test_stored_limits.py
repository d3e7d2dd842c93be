"""Byte limits on what the server keeps for callers (#26): task arguments, answers and results,
round and `once` outcomes, one principal's quota, and a full memory store (503, nothing evicted).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import msgspec
import pytest

from mrtr import Context, Form, Server
from mrtr.errors import LimitExceeded, OutcomeTooLarge, from_wire
from mrtr.server import Peer, StoreLimits
from mrtr.server._ledger import Ledger
from mrtr.stores import MemoryStore
from tests.server.tasks_harness import Replica, accept

LIMITS = StoreLimits(max_arguments=4096, max_answer=2048, max_outcome=8192,
                     principal_bytes=40_000, anonymous_bytes=40_000)
app = Server("limits", limits=LIMITS)
RAN: list[str] = []


class Name(Form):
    name: str


@app.tool(task="required")
async def park(ctx: Context, data: str) -> str:
    """A task that keeps its arguments while it waits for an answer."""
    answer = await ctx.elicit("Name?", Name, key="n")
    return f"{answer.name}: {len(data)}"


@app.tool(task="required")
async def produce(size: int) -> str:
    return "r" * size


@app.tool()
async def greet(ctx: Context) -> str:
    """A round of someone else: an elicitation, then the result."""
    answer = await ctx.elicit("Name?", Name, key="n")
    return f"Hello, {answer.name}"


@app.tool()
async def big(ctx: Context, size: int) -> str:
    if not await ctx.confirm("Go?", key="go"):
        return "no"
    RAN.append("big")
    return "b" * size


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 20))


def error_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" in reply, reply
    error: dict[str, Any] = reply["error"]
    return error


async def greet_round(replica: Replica, principal: str | None) -> str:
    """Both rounds of `greet` for `principal`: the text of its result."""
    first = await replica.call("greet", principal=principal)
    assert first["resultType"] == "input_required", first
    again = await replica.send("tools/call", {
        "name": "greet", "arguments": {}, "requestState": first["requestState"],
        "inputResponses": {"n": accept({"name": "Bea"})}}, principal=principal)
    assert "result" in again, again
    text: str = again["result"]["content"][0]["text"]
    return text


def test_26_task_arguments_over_the_limit_get_an_error_naming_it_and_nothing_is_kept() -> None:
    async def go() -> None:
        store = MemoryStore()
        replica = Replica(app, store)
        reply = await replica.send("tools/call", {"name": "park",
                                                  "arguments": {"data": "x" * 5000}})
        error = error_of(reply)
        assert error["code"] == -32602
        assert "StoreLimits.max_arguments" in error["message"]
        assert "over the limit of 4,096 bytes" in error["message"]
        assert error["data"] == {"type": "limit_exceeded", "setting": "StoreLimits.max_arguments",
                                 "limit": 4096, "size": len('{"data":""}') + 5000}
        assert isinstance(from_wire(error), LimitExceeded)  # a client can catch it by class
        assert not [k for k in store._entries if k.startswith("task:")]
        assert (await replica.call("park", {"data": "x" * 3000}))["status"] == "working"
    run(go())


def test_26_one_principal_filling_its_quota_gets_the_error_and_nobody_else_notices() -> None:
    async def go() -> None:
        store = MemoryStore()
        replica = Replica(app, store)
        made: list[str] = []
        refusal: dict[str, Any] | None = None
        for _ in range(40):  # each parked task keeps ~3.6 KB of arguments and journal
            reply = await replica.send("tools/call", {"name": "park",
                                                      "arguments": {"data": "f" * 3500}},
                                       principal="flood")
            if "error" in reply:
                refusal = reply["error"]
                break
            made.append(reply["result"]["taskId"])
            await replica.wait(made[-1], "input_required", principal="flood")
        assert refusal is not None and 5 < len(made) < 12, (len(made), refusal)
        assert refusal["code"] == -32602
        assert "StoreLimits.principal_bytes" in refusal["message"]
        assert "quota of 40,000 bytes" in refusal["message"]
        print(f"\nquota 40,000 bytes: {len(made)} parked tasks of 3.5 KB, then {refusal}")
        # Another principal, and anonymous callers: rounds and tasks as before.
        for principal in ("victim", None):
            assert await greet_round(replica, principal) == "Hello, Bea"
            task = (await replica.call("park", {"data": "v" * 3500},
                                       principal=principal))["taskId"]
            parked = await replica.wait(task, "input_required", principal=principal)
            (key,) = parked["inputRequests"]
            await replica.update(task, {key: accept({"name": "Vic"})}, principal=principal)
            done = await replica.wait(task, "completed", principal=principal)
            assert done["result"]["content"][0]["text"] == "Vic: 3500"
        # The flood's own rounds still work; ending one of its tasks frees room for another.
        assert await greet_round(replica, "flood") == "Hello, Bea"
        assert "result" in await replica.cancel(made[0], principal="flood")
        await replica.wait(made[0], "cancelled", principal="flood")
        again = await replica.call("park", {"data": "f" * 3500}, principal="flood")
        assert again["status"] == "working"
    run(go())


def test_26_an_ended_task_keeps_only_its_result_not_its_arguments() -> None:
    async def go() -> None:
        store = MemoryStore()
        replica = Replica(app, store)
        task = (await replica.call("park", {"data": "a" * 4000}, principal="p"))["taskId"]
        parked = await replica.wait(task, "input_required", principal="p")
        held = await store.admitted("quota:principal:p")
        (key,) = parked["inputRequests"]
        await replica.update(task, {key: accept({"name": "Al"})}, principal="p")
        await replica.wait(task, "completed", principal="p")
        for name in (f"task:{task}", f"task:{task}:end"):
            found = await store.get(name)
            assert found is not None and found.outcome is not None
            assert b"a" * 100 not in found.outcome  # the arguments are gone
        after = await store.admitted("quota:principal:p")
        assert held > 4000 and after < 2000, (held, after)
    run(go())


def test_26_a_task_result_over_max_outcome_fails_the_task_with_the_limit() -> None:
    async def go() -> None:
        replica = Replica(app, MemoryStore())
        ok = await replica.wait((await replica.call("produce", {"size": 100}))["taskId"],
                                "completed")
        assert ok["result"]["content"][0]["text"] == "r" * 100
        task = (await replica.call("produce", {"size": 9000}))["taskId"]
        failed = await replica.wait(task, "failed")
        assert failed["error"]["code"] == -32603
        assert "StoreLimits.max_outcome" in failed["error"]["message"]
        assert isinstance(from_wire(failed["error"]), OutcomeTooLarge)
    run(go())


def test_26_an_answer_over_max_answer_is_refused_and_nothing_is_stored() -> None:
    async def go() -> None:
        store = MemoryStore()
        replica = Replica(app, store)
        task = (await replica.call("park", {"data": "d"}))["taskId"]
        (key,) = (await replica.wait(task, "input_required"))["inputRequests"]
        reply = await replica.update(task, {key: accept({"name": "n" * 3000})})
        error = error_of(reply)
        assert error["code"] == -32602 and "StoreLimits.max_answer" in error["message"]
        assert f"The answer to '{key}'" in error["message"]
        assert await store.get(f"task:{task}:in:{key}") is None
        assert (await replica.get(task))["result"]["status"] == "input_required"
        await replica.update(task, {key: accept({"name": "Short"})})
        assert (await replica.wait(task, "completed"))["result"]["content"][0]["text"] == \
            "Short: 1"
    run(go())


def test_26_a_round_outcome_over_max_outcome_answers_once_and_a_replay_gets_the_limit() -> None:
    async def go() -> None:
        RAN.clear()
        store = MemoryStore()
        replica = Replica(app, store)
        first = await replica.call("big", {"size": 20_000})
        params = {"name": "big", "arguments": {"size": 20_000},
                  "requestState": first["requestState"],
                  "inputResponses": {"go": accept({"confirm": True})}}
        answered = await replica.send("tools/call", params)
        assert answered["result"]["content"][0]["text"] == "b" * 20_000
        replayed = error_of(await replica.send("tools/call", params))
        assert replayed["code"] == -32603 and "StoreLimits.max_outcome" in replayed["message"]
        assert "a replay of it cannot be answered" in replayed["message"]
        assert RAN == ["big", "big"]  # re-run (it acts in no ctx.once), never answered twice
        assert all(len(e.outcome or b"") < 1000 for e in store._entries.values())
    run(go())


def test_26_a_once_value_over_max_outcome_is_returned_once_and_never_run_again() -> None:
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        return "v" * 500

    async def go() -> None:
        ledger = Ledger(MemoryStore(), logging.getLogger("test"), max_outcome=100)
        deadline = time.time() + 60
        assert await ledger.once("flow", "k", deadline, fn) == (False, "v" * 500)
        with pytest.raises(OutcomeTooLarge, match=r"ctx.once\('k'\).*StoreLimits.max_outcome"):
            await ledger.once("flow", "k", deadline, fn)
        assert await ledger.once("flow", "small", deadline, lambda: "s") == (False, "s")
        assert await ledger.once("flow", "small", deadline, lambda: "other") == (True, "s")
    run(go())
    assert calls == [1]


def test_26_a_full_memory_store_refuses_new_rounds_with_503_and_evicts_nothing() -> None:
    async def go() -> None:
        store = MemoryStore(max_bytes=200_000)
        replica = Replica(app, store)
        dispatcher = replica.dispatcher
        first = await replica.call("greet")
        await store.complete("filler", b"f" * 199_900, expires=time.time() + 60)
        body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
            "name": "greet", "arguments": {}, "requestState": first["requestState"],
            "inputResponses": {"n": accept({"name": "Bea"})},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}}
        reply = await dispatcher.handle_bytes(msgspec.json.encode(body), Peer(principal=None))
        assert reply is not None and reply.http_status == 503
        assert (b"retry-after", b"1") in reply.headers
        assert msgspec.json.decode(reply.body)["error"] == {"code": -32603,
                                                           "message": "Internal error"}
        assert await store.get("filler") is not None  # kept: never evicted to make room
        await store.complete("filler", b"", expires=time.time() + 60)  # room again
        reply = await dispatcher.handle_bytes(msgspec.json.encode(body), Peer(principal=None))
        assert reply is not None and reply.http_status == 200
    run(go())


small = Server("small-quota", limits=StoreLimits(principal_bytes=3000, anonymous_bytes=3000))


@small.tool(task="required")
async def asks_at_length(ctx: Context) -> str:
    await ctx.report_progress(1, 2, "s" * 4000)  # a status the quota cannot hold: not saved
    answer = await ctx.elicit("Q" * 5000, Name, key="n")  # parked, the record would hold it
    return answer.name


def test_26_a_task_whose_record_outgrows_the_quota_fails_with_the_quota_named() -> None:
    async def go() -> None:
        store = MemoryStore()
        replica = Replica(small, store)
        task = (await replica.call("asks_at_length", principal="p"))["taskId"]
        failed = await replica.wait(task, "failed", principal="p")
        assert failed["error"]["code"] == -32602
        assert "StoreLimits.principal_bytes" in failed["error"]["message"]
        # The status the quota could not hold was skipped, not fatal: the task went on to its
        # question, and the record parking it (status and question, 9 KB) was refused.
        assert failed["error"]["data"]["size"] > 9000
        assert "statusMessage" not in failed  # the small end: the reason, not the long status
        assert all(len(e.outcome or b"") < 3000 for e in store._entries.values())
    run(go())
