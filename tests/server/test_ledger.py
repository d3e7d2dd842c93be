"""Exactly-once rounds and `ctx.once` with a store: replays get the stored outcome (#13)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr import Context, Server
from mrtr.errors import InvalidParams
from mrtr.protocol import PROTOCOL_VERSION, InputRequiredResult
from mrtr.server import Dispatcher, Peer, Sealer
from mrtr.stores import MemoryStore, RedisStore, SQLiteStore, Store
from mrtr.testing import ALL_CAPABILITIES, Clock, TestClient
from tests.stores.conftest import free_port

KEY = b"k" * 32
PEER = Peer(principal=None, transport="memory")


class Till:
    """Counts what the paying tool does, the way a payment provider would."""

    def __init__(self) -> None:
        self.runs = 0  # handler invocations, any round
        self.charges = 0
        self.fail_next = False


def paying_server(till: Till, *, slow: float = 0.0) -> Server:
    app = Server("shop", version="1")

    @app.tool()
    async def pay(ctx: Context, amount: int) -> str:
        till.runs += 1
        if not await ctx.confirm(f"Pay {amount}?", key="ok"):
            return "not paid"
        note = await ctx.elicit_schema("Note?", {"type": "object", "properties": {
            "note": {"type": "string"}}, "required": ["note"]}, key="args:note") \
            if amount > 100 else {"note": ""}

        async def charge() -> str:
            await asyncio.sleep(slow)
            till.charges += 1
            return f"CH-{till.charges}"

        receipt = await ctx.once("charge", charge)
        if till.fail_next:  # the round fails after the charge: a crash the client retries
            till.fail_next = False
            raise InvalidParams("try again")
        return f"paid {amount} {receipt} {note['note']}"

    return app


def message(request_id: int, params: dict[str, Any]) -> bytes:
    meta = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": ALL_CAPABILITIES}
    return msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                "params": {"name": "pay", **params, "_meta": meta}})


def final_round(client: TestClient, amount: int = 5) -> dict[str, Any]:
    """The params of the last request of a completed `pay` flow."""
    answers = {"ok": True, "args:note": {"note": "x"}}
    flow = client.call_tool("pay", {"amount": amount}, answers=answers)
    assert flow.text.startswith(f"paid {amount}")
    return {"arguments": {"amount": amount}, **flow.requests[-1]}


def test_13_replaying_the_final_round_charges_once_with_identical_bytes() -> None:
    till, clock = Till(), Clock()
    with TestClient(paying_server(till), clock=clock, store=MemoryStore(clock=clock)) as client:
        params = final_round(client)
        runs = till.runs
        bodies = [client._runner.run(client.dispatcher.handle_bytes(message(7, params), PEER))
                  for _ in range(3)]
    # A replay runs the handler's code up to its first ctx.once, which meets the recorded round
    # and answers its outcome: nothing inside ctx.once runs again (docs/deploy.md).
    assert till.charges == 1 and till.runs == runs + 3
    assert len({reply.body for reply in bodies if reply is not None}) == 1
    assert b'"paid 5 CH-1 "' in bodies[0].body  # type: ignore[union-attr]


def test_13_replaying_an_input_required_round_returns_the_same_state() -> None:
    till, clock = Till(), Clock()
    with TestClient(paying_server(till), clock=clock, store=MemoryStore(clock=clock)) as client:
        answers = {"ok": True, "args:note": {"note": "n"}}
        flow = client.call_tool("pay", {"amount": 500}, answers=answers)
        assert flow.rounds == 3
        runs = till.runs
        again = client.send("tools/call", {"name": "pay", **flow.requests[1]})
    # That round ran no ctx.once: it was recorded by one write, and its replay answers the
    # recorded state (the same round id for the next round), not a state of its own.
    assert again["result"] == flow.replies[1]["result"]
    assert till.runs == runs + 1 and till.charges == 1


def test_13_replay_with_other_answers_is_rejected_and_charges_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    till, clock = Till(), Clock()
    with TestClient(paying_server(till), clock=clock, store=MemoryStore(clock=clock)) as client:
        params = final_round(client, amount=500)
        runs = till.runs
        params["inputResponses"] = {"args:note": {"action": "accept", "content": {"note": "other"}}}
        with caplog.at_level(logging.WARNING, logger="mrtr.server"):
            reply = client.send("tools/call", {"name": "pay", **params})
    assert reply["error"] == {"code": -32602, "message": "Invalid or expired requestState"}
    assert till.runs == runs + 1 and till.charges == 1  # stopped at its ctx.once
    assert "other answers" in caplog.text


def test_13_concurrent_duplicates_run_once_and_all_get_the_outcome() -> None:
    till, clock = Till(), Clock()
    with TestClient(paying_server(till, slow=0.05), clock=clock,
                    store=MemoryStore(clock=clock)) as client:
        first = client.send("tools/call", {"name": "pay", "arguments": {"amount": 5}})
        params = {"arguments": {"amount": 5}, "requestState": first["result"]["requestState"],
                  "inputResponses": {"ok": {"action": "accept", "content": {"confirm": True}}}}
        runs = till.runs

        async def burst() -> list[bytes]:
            replies = await asyncio.gather(*(
                client.dispatcher.handle_bytes(message(9, params), PEER) for _ in range(6)))
            return [r.body for r in replies if r is not None]

        bodies = client._runner.run(burst())
    assert len(bodies) == 6 and len(set(bodies)) == 1, bodies
    assert till.charges == 1 and till.runs == runs + 6  # each ran up to its ctx.once


def test_13_once_runs_once_per_flow_when_the_round_is_retried_after_a_failure() -> None:
    till, clock = Till(), Clock()
    with TestClient(paying_server(till), clock=clock, store=MemoryStore(clock=clock)) as client:
        first = client.send("tools/call", {"name": "pay", "arguments": {"amount": 5}})
        params = {"name": "pay", "arguments": {"amount": 5},
                  "requestState": first["result"]["requestState"],
                  "inputResponses": {"ok": {"action": "accept", "content": {"confirm": True}}}}
        till.fail_next = True
        failed = client.send("tools/call", params)
        retried = client.send("tools/call", params)
    assert failed["error"]["code"] == -32602
    assert retried["result"]["content"][0]["text"] == "paid 5 CH-1 "
    assert till.charges == 1


def test_13_two_processes_sharing_a_sqlite_store_run_a_replayed_round_once(
    tmp_path: Path,
) -> None:
    till = Till()
    app = paying_server(till)
    sealer = Sealer(keys=[KEY], audience="shop")
    stores: list[Store] = [SQLiteStore(tmp_path / "s.db"), SQLiteStore(tmp_path / "s.db")]
    one, two = (Dispatcher(app, sealer=sealer, store=s) for s in stores)

    async def main() -> list[bytes]:
        first = msgspec.json.decode((await one.handle_bytes(message(1, {"arguments": {
            "amount": 5}}), PEER)).body)  # type: ignore[union-attr]
        params = {"arguments": {"amount": 5},
                  "requestState": first["result"]["requestState"],
                  "inputResponses": {"ok": {"action": "accept", "content": {"confirm": True}}}}
        bodies = []
        for dispatcher in (one, two, one, two):
            reply = await dispatcher.handle_bytes(message(2, params), PEER)
            assert reply is not None
            bodies.append(reply.body)
        for store in stores:
            await store.aclose()
        return bodies

    bodies = asyncio.run(main())
    assert len(set(bodies)) == 1 and till.charges == 1


def test_13_an_unreachable_store_fails_closed_with_a_frozen_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    till, clock = Till(), Clock()
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", timeout=0.3)
    with TestClient(paying_server(till), clock=clock, store=store) as client:
        first = client.send("tools/call", {"name": "pay", "arguments": {"amount": 5}})
        runs = till.runs
        with caplog.at_level(logging.ERROR, logger="mrtr.server"):
            reply = client.send("tools/call", {
                "name": "pay", "arguments": {"amount": 5},
                "requestState": first["result"]["requestState"],
                "inputResponses": {"ok": {"action": "accept", "content": {"confirm": True}}}})
        client._runner.run(store.aclose())
    assert reply["error"] == {"code": -32603, "message": "Internal error"}
    assert till.runs == runs + 1 and till.charges == 0  # refused at its ctx.once's claim
    assert "store unavailable" in caplog.text


def test_13_without_a_store_rounds_stay_replayable_as_before() -> None:
    till = Till()
    with TestClient(paying_server(till)) as client:
        params = final_round(client)
        client.send("tools/call", {"name": "pay", **params})
    assert till.charges == 2  # documented: without a store a replay runs again


def test_13_prompts_and_resources_replay_their_stored_result() -> None:
    app = Server("docs", version="1")
    runs: list[str] = []

    @app.prompt()
    async def brief(ctx: Context, audience: str) -> str:
        runs.append("prompt")
        ok = await ctx.confirm("Go?", key="ok")
        return f"Brief {audience} ({ok})"

    @app.resource("mem://notes/{day}")
    async def notes(ctx: Context, day: str) -> str:
        runs.append("resource")
        ok = await ctx.confirm("Go?", key="ok")
        return f"{day}: {ok}"

    clock = Clock()
    with TestClient(app, clock=clock, store=MemoryStore(clock=clock)) as client:
        prompt = client.get_prompt("brief", {"audience": "ops"}, answers={"ok": True})
        resource = client.read_resource("mem://notes/mon", answers={"ok": True})
        count = len(runs)
        again = [client.send("prompts/get", prompt.requests[-1]),
                 client.send("resources/read", resource.requests[-1])]
    assert [reply["result"] for reply in again] == [prompt.result, resource.result]
    assert count == 4 and len(runs) == 6  # re-run, but answered from the record


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=10)


@settings(max_examples=40, deadline=None)
@given(value=JSON_VALUES)
def test_13_a_replay_is_byte_identical_whatever_the_result_holds(value: object) -> None:
    app = Server("echo", version="1")

    @app.tool()
    async def echo(ctx: Context) -> dict[str, object]:
        await ctx.confirm("Go?", key="ok")
        return {"value": value}

    clock = Clock()
    with TestClient(app, clock=clock, store=MemoryStore(clock=clock)) as client:
        first = client.send("tools/call", {"name": "echo"})
        params = {"name": "echo", "requestState": first["result"]["requestState"],
                  "inputResponses": {"ok": {"action": "accept", "content": {"confirm": True}}}}
        bodies = [client._runner.run(client.dispatcher.handle_bytes(_raw(params), PEER))
                  for _ in range(2)]
    assert bodies[0] is not None and bodies[1] is not None
    assert bodies[0].body == bodies[1].body


def _raw(params: dict[str, Any]) -> bytes:
    meta = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": ALL_CAPABILITIES}
    return msgspec.json.encode({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                "params": {**params, "_meta": meta}})


def test_13_a_round_running_longer_than_its_lease_still_runs_once() -> None:
    from mrtr.server._ledger import Ledger

    ledger = Ledger(MemoryStore(), logging.getLogger("test"), lease=0.1, wait=5)
    runs: list[int] = []
    effects: list[int] = []

    async def work() -> Any:
        runs.append(1)
        await ledger.hold_round()  # what ctx.once does before it acts: claim the round
        effects.append(1)
        await asyncio.sleep(0.5)  # five leases: renewals keep the claim
        return InputRequiredResult(request_state="s")

    async def main() -> list[Any]:
        deadline = time.time() + 60  # sealed with the state: the same in every redemption
        first = asyncio.ensure_future(ledger.redeem("r1", {}, deadline, Any, work))
        await asyncio.sleep(0.3)
        second = await ledger.redeem("r1", {}, deadline, Any, work)
        return [await first, second]

    first, second = asyncio.run(main())
    assert effects == [1] and runs == [1, 1] and first == second


def test_13_a_first_round_that_finishes_costs_no_flow_id_or_deadline_with_a_store() -> None:
    # Round 1 has nothing to redeem: with a store it must cost what it costs without one. The
    # flow id and deadline are fixed only when `once` or a suspension needs them.
    ticks: list[float] = []

    def clock() -> float:
        ticks.append(time.time())
        return ticks[-1]

    app = Server("plain", version="1")

    @app.tool()
    async def echo(text: str) -> str:
        return text

    @app.tool()
    async def stamp(ctx: Context) -> str:
        first = await ctx.once("id", lambda: "S-1")
        await ctx.confirm("Go?", key="go")
        return str(first)

    store = MemoryStore()
    dispatcher = Dispatcher(app, sealer=Sealer(keys=[KEY], audience="a", clock=clock),
                            store=store)
    body = message(1, {"arguments": {"text": "hi"}}).replace(b'"pay"', b'"echo"')
    reply = asyncio.run(dispatcher.handle_bytes(body, PEER))
    assert reply is not None and b'"hi"' in reply.body
    assert ticks == [] and len(store) == 0
    # ctx.once on round 1 still keys on the flow id its later rounds carry, until its deadline
    fake = Clock()
    store = MemoryStore(clock=fake)
    with TestClient(app, clock=fake, store=store) as client:
        flow = client.call_tool("stamp", {}, answers={"go": True})
        assert flow.text == "S-1"
        assert any(key.startswith("once:") and key.endswith(":id") for key in store._entries)


def test_13_a_round_finishing_within_a_third_of_its_lease_starts_no_renewal_task() -> None:
    from mrtr.server._ledger import Ledger

    ledger = Ledger(MemoryStore(), logging.getLogger("test"), lease=30, wait=5)
    seen: list[int] = []

    async def work() -> Any:
        seen.append(len(asyncio.all_tasks()))  # only main(): no renewal task beside it
        return InputRequiredResult(request_state="s")

    async def main() -> Any:
        return await ledger.redeem("r1", {}, time.time() + 60, Any, work)

    assert asyncio.run(main()) == InputRequiredResult(request_state="s")
    assert seen == [1]


def test_13_a_full_memory_store_fails_closed_with_a_frozen_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    till, clock = Till(), Clock()
    store = MemoryStore(clock=clock, max_entries=2)
    with TestClient(paying_server(till), clock=clock, store=store) as client:
        final_round(client)  # its round and its `once` fill the store (until the deadline)
        first = client.send("tools/call", {"name": "pay", "arguments": {"amount": 5}})
        runs = till.runs
        with caplog.at_level(logging.ERROR, logger="mrtr.server"):
            reply = client.send("tools/call", {
                "name": "pay", "arguments": {"amount": 5},
                "requestState": first["result"]["requestState"],
                "inputResponses": {"ok": {"action": "accept", "content": {"confirm": True}}}})
    assert reply["error"] == {"code": -32603, "message": "Internal error"}
    assert till.runs == runs + 1 and till.charges == 1  # only the first flow's charge
    assert "memory store full (2 entries)" in caplog.text


class Died(BaseException):
    """The process serving the round died: nothing after this point runs."""


class DyingStore(MemoryStore):
    """A MemoryStore whose process dies right after the next charge it applies."""

    dying = False
    dead = False

    def _die(self) -> None:
        if self.dying:
            self.dying, self.dead = False, True
            raise Died()

    async def add(self, key: str, amount: int, *, expires: float) -> int:
        value = await super().add(key, amount, expires=expires)
        if amount:
            self._die()
        return value

    async def add_once(self, key: str, amount: int, *, token: str, expires: float) -> int:
        value = await super().add_once(key, amount, token=token, expires=expires)
        self._die()
        return value

    async def release(self, key: str, *, holder: str | None = None) -> None:
        if not self.dead:  # a dead process releases nothing: its claims lapse with the lease
            await super().release(key, holder=holder)


def test_13_a_crash_inside_once_after_the_charge_never_charges_twice() -> None:
    from examples.payments import app

    clock = Clock()
    store = DyingStore(clock=clock)
    args = {"invoice": "INV-9", "amount": 40}
    with TestClient(app, clock=clock, store=store) as client:
        first = client.send("tools/call", {"name": "pay", "arguments": args})
        final = {"name": "pay", "arguments": args,
                 "requestState": first["result"]["requestState"],
                 "inputResponses": {"confirm": {"action": "accept",
                                                "content": {"confirm": True}}}}
        store.dying = True
        with pytest.raises(Died):
            client.send("tools/call", final)
        store.dead = False  # another process retries the round once the claims' lease lapsed
        clock.advance(31)
        retried = client.send("tools/call", final)
        again = client.send("tools/call", final)
        charged = client.call_tool("charges", {"invoice": "INV-9"}).text
    assert retried["result"]["content"][0]["text"] == (
        "Paid 40 EUR for invoice INV-9: receipt R-INV-9-1.")
    assert again["result"] == retried["result"] and charged == "1"


def test_13_the_idempotency_key_is_stable_across_rounds_and_distinct_per_flow_and_key() -> None:
    seen: list[tuple[int, str, str]] = []
    app = Server("keys", version="1")

    @app.tool()
    async def keyed(ctx: Context) -> str:
        seen.append((ctx.round, ctx.idempotency_key("a"), ctx.idempotency_key("b")))
        await ctx.confirm("Go?", key="go")
        return "ok"

    for store in (MemoryStore(), None):
        with TestClient(app, store=store) as client:
            for _ in range(2):
                client.call_tool("keyed", {}, answers={"go": True})
    flows = [seen[i:i + 2] for i in range(0, len(seen), 2)]
    for (r1, a1, b1), (r2, a2, b2) in flows:
        assert (r1, r2) == (1, 2) and a1 == a2 and b1 == b2 and a1 != b1
        assert len(a1) == 32 and int(a1, 16) >= 0
    assert len({flow[0][1] for flow in flows}) == 4  # every flow its own key
