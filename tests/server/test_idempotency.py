"""`params.idempotencyKey` on tools/call (#25): one effect per key, the stored outcome replayed.

Every test runs against a real store (memory and SQLite) through the Dispatcher, the way a
transport drives it; docs/deploy.md ("Idempotency keys") is the behaviour checked here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mrtr import Context, Server
from mrtr.errors import InvalidParams
from mrtr.protocol import PROTOCOL_VERSION, TASKS_EXTENSION
from mrtr.server import Dispatcher, IdempotencyPolicy, Peer, Reply, Sealer
from mrtr.stores import Claim, MemoryStore, SQLiteStore, Store, StoreUnavailable
from mrtr.testing import ALL_CAPABILITIES, Clock

CONFIRM = {"action": "accept", "content": {"confirm": True}}


class Till:
    """What the shop's tools did, counted the way a payment provider would."""

    def __init__(self) -> None:
        self.charges = 0
        self.runs = 0
        self.gate: asyncio.Event | None = None  # set: `charge` waits for it before charging
        self.fail_next = False
        self.size = 10


def shop(till: Till) -> Server:
    app = Server("shop", version="1")
    _plain_tools(app, till)
    _flow_tools(app, till)
    return app


def _plain_tools(app: Server, till: Till) -> None:
    @app.tool()
    async def charge(amount: int) -> str:
        till.runs += 1
        if till.gate is not None:
            await till.gate.wait()
        till.charges += 1
        return f"charged {amount} as CH-{till.charges}"

    @app.tool()
    async def report() -> str:
        till.charges += 1
        return "x" * till.size

    @app.tool(task="optional")
    async def export(ctx: Context, rows: int) -> str:
        till.charges += 1
        return f"exported {rows}"


def _flow_tools(app: Server, till: Till) -> None:
    @app.tool()
    async def pay(ctx: Context, amount: int) -> str:
        """Asks once, or twice above 100, then charges once per flow."""
        till.runs += 1
        if not await ctx.confirm(f"Pay {amount}?", key="ok"):
            return "not paid"
        if amount > 100 and not await ctx.confirm("Really?", key="sure"):
            return "not paid"

        async def book() -> str:
            till.charges += 1
            return f"CH-{till.charges}"

        receipt = await ctx.once("charge", book)
        if till.fail_next:
            till.fail_next = False
            raise InvalidParams("the provider said: try again")
        return f"paid {amount} {receipt}"

    @app.tool()
    async def book(ctx: Context, seat: str) -> str:
        """Charges in round 1 (no asks), then may fail."""
        till.runs += 1

        async def hold() -> str:
            till.charges += 1
            return f"CH-{till.charges}"

        receipt = await ctx.once("charge", hold)
        if till.fail_next:
            till.fail_next = False
            raise InvalidParams("the provider said: try again")
        return f"booked {seat} {receipt}"


def message(request_id: int | str, name: str, arguments: dict[str, Any] | None = None,
            *, tasks: bool = False, **params: object) -> bytes:
    caps: dict[str, Any] = dict(ALL_CAPABILITIES)
    if tasks:
        caps["extensions"] = {TASKS_EXTENSION: {}}
    meta = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": caps}
    return msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                "params": {"name": name, "arguments": arguments or {},
                                           **params, "_meta": meta}})


class Shop:
    """One Dispatcher over a real store, called as `principal`s would over a transport."""

    def __init__(self, store: Store, till: Till, **options: Any) -> None:
        self.store, self.till = store, till
        self.dispatcher = Dispatcher(shop(till), sealer=Sealer(keys=[b"k" * 32], audience="shop"),
                                     store=store, **options)
        self._ids = iter(range(1, 10_000))

    async def reply(self, name: str, arguments: dict[str, Any] | None = None, *,
                    principal: str | None = None, **params: object) -> Reply:
        raw = message(next(self._ids), name, arguments, **params)
        reply = await self.dispatcher.handle_bytes(raw, Peer(principal=principal,
                                                             transport="memory"))
        assert reply is not None
        return reply

    async def call(self, name: str, arguments: dict[str, Any] | None = None,
                   **params: object) -> dict[str, Any]:
        return msgspec.json.decode((await self.reply(name, arguments, **params)).body)  # type: ignore[no-any-return]


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    if request.param == "memory":
        yield MemoryStore
    else:
        yield lambda: SQLiteStore(tmp_path / "store.db")


def run(make_store: Callable[[], Store], body: Callable[[Shop], Awaitable[None]],
        **options: Any) -> Till:
    till = Till()

    async def main() -> None:
        store = make_store()
        try:
            await asyncio.wait_for(body(Shop(store, till, **options)), 30)
        finally:
            await store.aclose()

    asyncio.run(main())
    return till


def result_of(body: bytes) -> bytes:
    """The reply without its id: what must be byte-identical across replays."""
    return body.split(b',"result":', 1)[1]


def text(reply: dict[str, Any]) -> str:
    return "".join(c["text"] for c in reply["result"]["content"])


# -- one key, one effect -----------------------------------------------------------------------

def test_25_the_same_key_twice_is_one_effect_and_the_identical_result(make_store: Any) -> None:
    bodies: list[bytes] = []

    async def body(s: Shop) -> None:
        for _ in range(3):
            reply = await s.reply("charge", {"amount": 5}, idempotencyKey="order-1")
            assert reply.http_status == 200
            bodies.append(reply.body)

    till = run(make_store, body)
    assert till.charges == 1 and till.runs == 1
    assert len({result_of(b) for b in bodies}) == 1
    assert b"charged 5 as CH-1" in bodies[0]


def test_25_calls_without_a_key_are_not_deduplicated(make_store: Any) -> None:
    async def body(s: Shop) -> None:
        first = await s.call("charge", {"amount": 5})
        second = await s.call("charge", {"amount": 5})
        assert (text(first), text(second)) == ("charged 5 as CH-1", "charged 5 as CH-2")

    assert run(make_store, body).charges == 2


def test_25_a_new_key_is_a_new_call(make_store: Any) -> None:
    async def body(s: Shop) -> None:
        for key in ("a", "b"):
            await s.call("charge", {"amount": 5}, idempotencyKey=key)

    assert run(make_store, body).charges == 2


def test_25_the_same_key_with_other_arguments_is_a_conflict(make_store: Any) -> None:
    async def body(s: Shop) -> None:
        await s.call("charge", {"amount": 5}, idempotencyKey="k")
        for name, arguments in (("charge", {"amount": 6}), ("report", {})):
            reply = await s.reply(name, arguments, idempotencyKey="k")
            error = msgspec.json.decode(reply.body)["error"]
            assert error["code"] == -32602 and reply.http_status == 400
            assert error["data"] == {"type": "idempotency_key_conflict"}
        # Equal JSON is the same call: key order and 5.0 for 5 do not make a conflict.
        again = await s.call("charge", {"amount": 5.0}, idempotencyKey="k")
        assert text(again) == "charged 5 as CH-1"

    assert run(make_store, body).charges == 1


def test_25_a_duplicate_while_the_first_runs_is_told_to_retry_then_gets_the_outcome(
    make_store: Any,
) -> None:
    async def body(s: Shop) -> None:
        s.till.gate = asyncio.Event()
        first = asyncio.ensure_future(s.reply("charge", {"amount": 5}, idempotencyKey="k"))
        while s.till.runs == 0:
            await asyncio.sleep(0.005)
        busy = await s.reply("charge", {"amount": 5}, idempotencyKey="k")
        error = msgspec.json.decode(busy.body)["error"]
        assert busy.http_status == 409
        assert error["code"] == -32603
        assert error["data"] == {"type": "idempotency_key_in_progress", "retryAfter": 0.5}
        s.till.gate.set()
        done = await first
        later = await s.reply("charge", {"amount": 5}, idempotencyKey="k")
        assert result_of(later.body) == result_of(done.body)

    till = run(make_store, body, idempotency=IdempotencyPolicy(retry_after=0.5))
    assert till.charges == 1 and till.runs == 1


def test_25_a_slow_call_keeps_its_key_past_the_lease(make_store: Any) -> None:
    # The claim is renewed while the call runs: a duplicate 3 leases later is still refused.
    async def body(s: Shop) -> None:
        s.till.gate = asyncio.Event()
        first = asyncio.ensure_future(s.reply("charge", {"amount": 5}, idempotencyKey="k"))
        await asyncio.sleep(0.6)
        busy = await s.call("charge", {"amount": 5}, idempotencyKey="k")
        assert busy["error"]["data"]["type"] == "idempotency_key_in_progress"
        s.till.gate.set()
        await first

    till = run(make_store, body, lease=0.2)
    assert till.charges == 1 and till.runs == 1


def test_25_keys_are_scoped_to_the_principal(make_store: Any) -> None:
    async def body(s: Shop) -> None:
        alice = await s.call("charge", {"amount": 5}, idempotencyKey="k", principal="alice")
        bob = await s.call("charge", {"amount": 7}, idempotencyKey="k", principal="bob")
        anonymous = await s.call("charge", {"amount": 5}, idempotencyKey="k")
        assert text(alice) == "charged 5 as CH-1"
        assert text(bob) == "charged 7 as CH-2"  # no conflict: bob's key is his own
        assert text(anonymous) == "charged 5 as CH-3"
        again = await s.call("charge", {"amount": 5}, idempotencyKey="k", principal="alice")
        assert text(again) == "charged 5 as CH-1"

    assert run(make_store, body).charges == 3


def test_25_a_key_is_kept_for_its_ttl_then_forgotten() -> None:
    clock = Clock(now=1_000_000.0)
    policy = IdempotencyPolicy(ttl=60, clock=clock)

    async def body(s: Shop) -> None:
        await s.call("charge", {"amount": 5}, idempotencyKey="k")
        clock.advance(59)
        assert text(await s.call("charge", {"amount": 5}, idempotencyKey="k")).endswith("CH-1")
        clock.advance(2)
        assert text(await s.call("charge", {"amount": 5}, idempotencyKey="k")).endswith("CH-2")

    assert run(lambda: MemoryStore(clock=clock), body, idempotency=policy).charges == 2


def test_25_a_result_over_max_record_is_answered_but_never_run_twice(
    make_store: Any, caplog: pytest.LogCaptureFixture,
) -> None:
    async def body(s: Shop) -> None:
        s.till.size = 5000
        first = await s.call("report", idempotencyKey="k")
        assert text(first) == "x" * 5000
        again = await s.call("report", idempotencyKey="k")
        assert again["error"]["code"] == -32603
        assert "too large" in again["error"]["message"]

    with caplog.at_level(logging.WARNING, logger="mrtr.server"):
        till = run(make_store, body, idempotency=IdempotencyPolicy(max_record=4096))
    assert till.charges == 1
    assert "over max_record" in caplog.text


# -- across MRTR rounds --------------------------------------------------------------------------

def test_25_the_key_names_the_whole_flow_and_a_retried_round_1_gets_its_newest_point(
    make_store: Any,
) -> None:
    async def body(s: Shop) -> None:
        args = {"amount": 500}
        one = await s.call("pay", args, idempotencyKey="k")
        assert one["result"]["resultType"] == "input_required"
        # A duplicate of round 1 gets the same input_required, requestState and all.
        assert (await s.call("pay", args, idempotencyKey="k"))["result"] == one["result"]
        two = await s.call("pay", args, idempotencyKey="k",
                           requestState=one["result"]["requestState"],
                           inputResponses={"ok": CONFIRM})
        assert set(two["result"]["inputRequests"]) == {"sure"}
        # Mid-way: round 1 again gets the newest point of the flow, so the client continues it.
        mid = await s.call("pay", args, idempotencyKey="k")
        assert mid["result"] == two["result"]
        final = await s.call("pay", args, idempotencyKey="k",
                             requestState=mid["result"]["requestState"],
                             inputResponses={"sure": CONFIRM})
        assert text(final) == "paid 500 CH-1"
        after = await s.reply("pay", args, idempotencyKey="k")
        assert msgspec.json.decode(after.body)["result"] == final["result"]

    assert run(make_store, body).charges == 1


def test_25_a_stale_round_does_not_move_the_record_back(make_store: Any) -> None:
    async def body(s: Shop) -> None:
        args = {"amount": 500}
        one = await s.call("pay", args, idempotencyKey="k")
        round_2 = {"requestState": one["result"]["requestState"], "inputResponses": {"ok": CONFIRM}}
        two = await s.call("pay", args, idempotencyKey="k", **round_2)
        final = await s.call("pay", args, idempotencyKey="k",
                             requestState=two["result"]["requestState"],
                             inputResponses={"sure": CONFIRM})
        replayed = await s.call("pay", args, idempotencyKey="k", **round_2)  # the ledger's replay
        assert replayed["result"] == two["result"]
        assert (await s.call("pay", args, idempotencyKey="k"))["result"] == final["result"]

    assert run(make_store, body).charges == 1


def test_25_a_later_round_with_a_key_used_for_other_arguments_is_a_conflict(
    make_store: Any,
) -> None:
    async def body(s: Shop) -> None:
        await s.call("charge", {"amount": 1}, idempotencyKey="k")
        one = await s.call("pay", {"amount": 5})
        reply = await s.call("pay", {"amount": 5}, idempotencyKey="k",
                             requestState=one["result"]["requestState"],
                             inputResponses={"ok": CONFIRM})
        assert reply["error"]["data"] == {"type": "idempotency_key_conflict"}

    assert run(make_store, body).charges == 1


def test_25_an_error_is_not_recorded_and_the_retry_shares_the_first_trys_once(
    make_store: Any,
) -> None:
    # A JSON-RPC error is no outcome: the retry runs the call again, but the flow id comes from
    # the key, so `ctx.once` (the charge) of the failed try is not repeated.
    async def body(s: Shop) -> None:
        args = {"amount": 5}
        one = await s.call("pay", args, idempotencyKey="k")
        params = {"requestState": one["result"]["requestState"], "inputResponses": {"ok": CONFIRM}}
        s.till.fail_next = True
        failed = await s.call("pay", args, idempotencyKey="k", **params)
        assert failed["error"]["code"] == -32602
        retried = await s.call("pay", args, idempotencyKey="k", **params)
        assert text(retried) == "paid 5 CH-1"

    assert run(make_store, body).charges == 1


@pytest.mark.parametrize("keyed", [True, False])
def test_25_round_1_retried_after_an_error_shares_its_once(make_store: Any, keyed: bool) -> None:
    async def body(s: Shop) -> None:
        key = {"idempotencyKey": "r1"} if keyed else {}
        s.till.fail_next = True
        failed = await s.call("book", {"seat": "4A"}, **key)
        assert failed["error"]["code"] == -32602
        retried = await s.call("book", {"seat": "4A"}, **key)
        assert text(retried).startswith("booked 4A")

    till = run(make_store, body)
    assert till.runs == 2
    assert till.charges == (1 if keyed else 2)  # without a key, each round 1 is a new flow


def test_25_a_task_tool_called_twice_with_one_key_is_one_task(make_store: Any) -> None:
    async def body(s: Shop) -> None:
        first = await s.call("export", {"rows": 3}, idempotencyKey="k", tasks=True)
        again = await s.call("export", {"rows": 3}, idempotencyKey="k", tasks=True)
        assert first["result"]["resultType"] == "task"
        assert again["result"]["taskId"] == first["result"]["taskId"]
        await asyncio.sleep(0.2)  # the task runs in the background

    assert run(make_store, body).charges == 1


# -- the request going away, the store failing ---------------------------------------------------

def test_25_a_cancelled_request_finishes_its_call_and_the_retry_gets_the_outcome(
    make_store: Any,
) -> None:
    async def body(s: Shop) -> None:
        s.till.gate = asyncio.Event()
        gone = asyncio.ensure_future(s.reply("charge", {"amount": 5}, idempotencyKey="k"))
        while s.till.runs == 0:
            await asyncio.sleep(0.005)
        gone.cancel()  # the client disconnected: the HTTP layer cancels the handler
        await asyncio.gather(gone, return_exceptions=True)
        busy = await s.call("charge", {"amount": 5}, idempotencyKey="k")
        assert busy["error"]["data"]["type"] == "idempotency_key_in_progress"
        s.till.gate.set()
        for _ in range(200):
            retry = await s.call("charge", {"amount": 5}, idempotencyKey="k")
            if "result" in retry:
                break
            await asyncio.sleep(0.01)
        assert text(retry) == "charged 5 as CH-1"

    till = run(make_store, body)
    assert till.charges == 1 and till.runs == 1


class Flaky:
    """A real store whose `complete` fails while `down` is set (a store outage)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.down = False

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        if self.down:
            raise StoreUnavailable("injected outage")
        await self.store.complete(key, outcome, expires=expires)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_25_an_outcome_the_store_could_not_take_is_pending_then_replayed_never_run_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As for rounds (_ledger.py): never a success that a replay could contradict. The caller
    # is told to retry (OutcomePending, 503), the claim stays held while the write is retried,
    # and the retry after the store recovered gets the recorded outcome.
    async def body(s: Shop) -> None:
        flaky = s.store
        assert isinstance(flaky, Flaky)
        flaky.down = True
        with caplog.at_level(logging.INFO, logger="mrtr.server"):
            first = await s.reply("charge", {"amount": 5}, idempotencyKey="k")
            assert first.http_status == 503
            assert msgspec.json.decode(first.body)["error"]["data"]["type"] == "outcome_pending"
            again = await s.call("charge", {"amount": 5}, idempotencyKey="k")
            assert again["error"]["data"]["type"] == "outcome_pending"
            flaky.down = False
            for _ in range(100):
                again = await s.call("charge", {"amount": 5}, idempotencyKey="k")
                if "result" in again:
                    break
                await asyncio.sleep(0.05)
        assert text(again) == "charged 5 as CH-1"
        assert await s.dispatcher.drain(1)

    till = run(lambda: Flaky(MemoryStore()), body)  # type: ignore[arg-type, return-value]
    assert till.charges == 1 and till.runs == 1
    assert "not recorded yet" in caplog.text and "after all" in caplog.text


def test_25_a_stopping_process_drains_the_calls_whose_requests_went_away(
    make_store: Any,
) -> None:
    async def body(s: Shop) -> None:
        s.till.gate = asyncio.Event()
        gone = asyncio.ensure_future(s.reply("charge", {"amount": 5}, idempotencyKey="k"))
        while s.till.runs == 0:
            await asyncio.sleep(0.005)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        assert not await s.dispatcher.drain(0.05)  # still running: not drained
        asyncio.get_running_loop().call_later(0.05, s.till.gate.set)
        assert await s.dispatcher.drain(5)
        after = await s.call("charge", {"amount": 5}, idempotencyKey="k")
        assert text(after) == "charged 5 as CH-1"  # recorded before the process would stop

    assert run(make_store, body).charges == 1


# -- declared only where it holds ------------------------------------------------------------------

def test_25_the_capability_is_declared_only_with_a_store_and_keys_on() -> None:
    till = Till()
    assert Dispatcher(shop(till)).capabilities().tools == {"idempotency": {}}  # its own store
    assert Dispatcher(shop(till), store=MemoryStore()).capabilities().tools == {
        "idempotency": {}}
    assert Dispatcher(shop(till), store=None).capabilities().tools == {}
    assert Dispatcher(shop(till), store=MemoryStore(), idempotency=None).capabilities().tools == {}


def test_25_without_a_store_a_key_is_ignored_as_the_capability_says() -> None:
    till = Till()

    async def main() -> None:
        s = Shop(None, till)  # type: ignore[arg-type]
        for _ in range(2):
            await s.call("charge", {"amount": 5}, idempotencyKey="k")

    asyncio.run(main())
    assert till.charges == 2


@pytest.mark.parametrize("key", ["", "a b", "é", "x" * 256, "tab\t", "line\n"])
def test_25_a_malformed_key_is_invalid_params_before_anything_runs(key: str) -> None:
    till = Till()

    async def main() -> dict[str, Any]:
        return await Shop(MemoryStore(), till).call("charge", {"amount": 5}, idempotencyKey=key)

    reply = asyncio.run(main())
    assert reply["error"]["code"] == -32602 and "idempotencyKey" in reply["error"]["message"]
    assert till.runs == 0


def test_25_a_key_of_255_visible_characters_is_accepted() -> None:
    till = Till()

    async def main() -> dict[str, Any]:
        return await Shop(MemoryStore(), till).call("charge", {"amount": 5},
                                                    idempotencyKey="~" * 255)

    assert text(asyncio.run(main())) == "charged 5 as CH-1"


def test_25_records_are_hashed_per_principal_and_key(make_store: Any) -> None:
    # The store sees neither the principal nor the key: only `idem:` and a SHA-256.
    seen: list[str] = []

    class Spy:
        def __init__(self, store: Store) -> None:
            self.store = store

        async def claim(self, key: str, *, lease: float, expires: float, holder: str = "",
                        index: str | None = None) -> Claim:
            seen.append(key)
            return await self.store.claim(key, lease=lease, expires=expires, holder=holder,
                                          index=index)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.store, name)

    async def body(s: Shop) -> None:
        await s.call("charge", {"amount": 5}, idempotencyKey="secret-key", principal="alice")

    run(lambda: Spy(make_store()), body)  # type: ignore[arg-type, return-value]
    assert len(seen) == 1 and seen[0].startswith("idem:") and len(seen[0]) == 5 + 64
    assert "secret" not in seen[0] and "alice" not in seen[0]
