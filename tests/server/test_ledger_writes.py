"""One write per round unless it acts (#31): rounds run unclaimed and store their outcome with
put_if_absent; the first effect (`ctx.once`, a task started) claims the round before it acts.

Each test injects what a claim-less round would get wrong: concurrent and sequential duplicates,
other answers that lead to other effects, rounds that stop before acting."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mrtr import Context, Server
from mrtr.protocol import PROTOCOL_VERSION
from mrtr.server import Dispatcher, Peer
from mrtr.stores import MemoryStore, SQLiteStore, Store
from mrtr.testing import ALL_CAPABILITIES, TestClient

PEER = Peer(principal=None, transport="memory")


class Effects:
    def __init__(self) -> None:
        self.runs = 0
        self.charged: list[str] = []
        self.store_ops: list[str] = []


def branching_server(effects: Effects) -> Server:
    """Round 2 answers which invoice to pay; round 2 pays it at once, in `ctx.once` keyed by the
    answer, so two redemptions of one state with other answers would pay two invoices."""
    app = Server("shop", version="1")

    @app.tool()
    async def pay(ctx: Context) -> str:
        effects.runs += 1
        invoice = await ctx.elicit_schema("Which invoice?", {"type": "object", "properties": {
            "id": {"type": "string"}}, "required": ["id"]}, key="which")

        async def charge() -> str:
            await asyncio.sleep(0.02)  # long enough for the duplicates to meet
            effects.charged.append(invoice["id"])
            return f"CH-{invoice['id']}"

        return await ctx.once(f"charge:{invoice['id']}", charge)

    @app.tool()
    async def greet(ctx: Context) -> str:
        effects.runs += 1
        first = await ctx.elicit_schema("Name?", {"type": "object", "properties": {
            "name": {"type": "string"}}, "required": ["name"]}, key="name")
        await ctx.confirm(f"Greet {first['name']}?", key="ok")  # round 2 ends input_required

        async def send() -> str:
            effects.charged.append(first["name"])
            return "sent"

        return await ctx.once("send", send)

    return app


def body(request_id: int, name: str, params: dict[str, Any]) -> bytes:
    meta = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": ALL_CAPABILITIES}
    return msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                "params": {"name": name, **params, "_meta": meta}})


def answer(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store]:
    """A store built inside the test's loop (the SQLite one binds to it)."""
    if request.param == "memory":
        return MemoryStore
    return lambda: SQLiteStore(tmp_path / "rounds.db")


class Rig:
    """A Dispatcher on a real store, driven with raw JSON-RPC bodies."""

    def __init__(self, effects: Effects, store: Store) -> None:
        self.store = store
        self.dispatcher = Dispatcher(branching_server(effects), store=store)

    async def send(self, name: str, params: dict[str, Any], request_id: int = 1) -> Any:
        reply = await self.dispatcher.handle_bytes(body(request_id, name, params), PEER)
        assert reply is not None
        return msgspec.json.decode(reply.body)

    async def burst(self, name: str, params: list[dict[str, Any]]) -> list[Any]:
        return await asyncio.gather(*(self.send(name, p, i) for i, p in enumerate(params)))


def test_31_concurrent_redemptions_with_other_answers_act_once(
    make_store: Callable[[], Store],
) -> None:
    effects = Effects()

    async def go() -> list[Any]:
        rig = Rig(effects, make_store())
        first = (await rig.send("pay", {}))["result"]
        replies = await rig.burst("pay", [
            {"requestState": first["requestState"],
             "inputResponses": {"which": answer({"id": f"INV-{i % 2}"})}} for i in range(6)])
        await rig.store.aclose()
        return replies

    replies = asyncio.run(go())
    # Without the claim taken at ctx.once, INV-0 and INV-1 would both be paid.
    assert len(effects.charged) == 1, effects.charged
    paid = effects.charged[0]
    winners = [r for r in replies if "result" in r]
    losers = [r for r in replies if "error" in r]
    assert {r["result"]["content"][0]["text"] for r in winners} == {f"CH-{paid}"}
    assert len(winners) == 3 and len(losers) == 3  # the other answers: frozen error
    assert {r["error"]["code"] for r in losers} == {-32602}


def test_31_a_later_redemption_with_other_answers_acts_never(
    make_store: Callable[[], Store],
) -> None:
    effects = Effects()

    async def go() -> tuple[Any, Any]:
        rig = Rig(effects, make_store())
        first = (await rig.send("pay", {}))["result"]
        params = {"requestState": first["requestState"],
                  "inputResponses": {"which": answer({"id": "INV-1"})}}
        paid = await rig.send("pay", params)
        other = await rig.send("pay", {**params,
                                       "inputResponses": {"which": answer({"id": "INV-2"})}})
        await rig.store.aclose()
        return paid, other

    paid, other = asyncio.run(go())
    assert paid["result"]["content"][0]["text"] == "CH-INV-1"
    assert other["error"]["code"] == -32602
    assert effects.charged == ["INV-1"]


def test_31_duplicates_of_a_round_that_acts_in_no_once_get_one_state(
    make_store: Callable[[], Store],
) -> None:
    effects = Effects()

    async def go() -> tuple[set[str], list[Any]]:
        rig = Rig(effects, make_store())
        first = (await rig.send("greet", {}))["result"]
        params = {"requestState": first["requestState"],
                  "inputResponses": {"name": answer({"name": "Ada"})}}
        replies = await rig.burst("greet", [params] * 5)
        replies.append(await rig.send("greet", params))  # later, in order
        states = {r["result"]["requestState"] for r in replies}
        finals = await rig.burst("greet", [
            {"requestState": state, "inputResponses": {"ok": answer({"confirm": True})}}
            for state in sorted(states) for _ in range(3)])
        await rig.store.aclose()
        return states, finals

    states, finals = asyncio.run(go())
    # One state for round 3 whoever redeemed round 2: without the record each duplicate would
    # mint its own, each a round 3 of its own to redeem.
    assert len(states) == 1
    assert {r["result"]["content"][0]["text"] for r in finals} == {"sent"}
    assert effects.charged == ["Ada"]


def test_31_a_round_that_acts_in_no_once_costs_one_store_write() -> None:
    calls: list[str] = []

    class Counting(MemoryStore):
        async def claim(self, key: str, *, lease: float, expires: float,
                        holder: str = "") -> Any:
            calls.append("claim")
            return await super().claim(key, lease=lease, expires=expires, holder=holder)

        async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
            calls.append("complete")
            await super().complete(key, outcome, expires=expires)

        async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Any:
            calls.append("put_if_absent")
            return await super().put_if_absent(key, outcome, expires=expires)

    effects = Effects()
    with TestClient(branching_server(effects), store=Counting()) as client:
        flow = client.call_tool("greet", answers={"name": {"name": "Bo"}, "ok": True})
        assert flow.text == "sent"
    # round 2 (no once): one put; round 3 (once): the round's claim, once's claim and both
    # completions.
    assert calls == ["put_if_absent", "claim", "claim", "complete", "complete"], calls


def test_31_concurrent_redemptions_of_the_round_that_starts_a_task_start_one() -> None:
    from tests.server.tasks_harness import pair

    app = Server("tasks")
    started: list[str] = []

    @app.tool(task="required")
    async def composed(ctx: Context) -> str:
        who = await ctx.elicit_schema("Name?", {"type": "object", "properties": {
            "name": {"type": "string"}}, "required": ["name"]}, key="who")
        await ctx.begin_task()
        started.append(who["name"])
        return f"Hello {who['name']}"

    async def go() -> tuple[list[Any], Any]:
        a, b, _ = pair(app)
        first = await a.call("composed")
        retry = {"name": "composed", "arguments": {}, "requestState": first["requestState"],
                 "inputResponses": {"who": answer({"name": "Ann"})}}
        replies = await asyncio.gather(*(r.send("tools/call", retry) for r in (a, b) * 3))
        done = await a.wait(replies[0]["result"]["taskId"], "completed")
        await asyncio.sleep(0.05)  # a second task, had one started, would have run by now
        return replies, done

    replies, done = asyncio.run(go())
    # Starting a task acts: the round is claimed first, so the duplicates replay its task.
    assert {r["result"]["taskId"] for r in replies} == {replies[0]["result"]["taskId"]}
    assert done["status"] == "completed" and started == ["Ann"]
