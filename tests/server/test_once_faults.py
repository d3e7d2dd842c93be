"""Claims survive cancellation and store failures: `once` never runs twice (#25).

A Dispatcher with a store, driven by hand: a request cancelled while `fn` runs (what the HTTP
layer does when the client goes away), a store that refuses the outcome write after `fn` ran,
and replays meanwhile and after recovery.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mrtr import Context, Server
from mrtr.errors import OutcomePending, from_wire
from mrtr.protocol import PROTOCOL_VERSION
from mrtr.server import Dispatcher, Peer, Reply, Sealer
from mrtr.server._ledger import Ledger
from mrtr.stores import Claim, ClaimStatus, MemoryStore, SQLiteStore, Store, StoreUnavailable
from mrtr.testing import ALL_CAPABILITIES

KEY = b"k" * 32
PEER = Peer(principal=None, transport="memory")
CONFIRM = {"ok": {"action": "accept", "content": {"confirm": True}}}


class Provider:
    """The payment provider: counts charges, and can take a while to answer."""

    def __init__(self, answer_after: float = 0.0) -> None:
        self.answer_after = answer_after
        self.charges = 0


def shop(provider: Provider) -> Server:
    app = Server("shop", version="1")

    @app.tool()
    async def pay(ctx: Context, invoice: str) -> str:
        if not await ctx.confirm(f"Pay {invoice}?", key="ok"):
            return "not paid"

        async def charge() -> str:
            provider.charges += 1  # the charge is made, then the provider is slow to answer
            await asyncio.sleep(provider.answer_after)
            return f"R-{invoice}-{provider.charges}"

        return f"paid {await ctx.once('charge', charge)}"

    return app


class FailingStore(MemoryStore):
    """A MemoryStore whose outcome writes fail for keys starting with `refuse` (when set), and
    every call while `down` is set (an outage)."""

    refuse: str | None = None
    down = False
    writes = 0

    def _check(self) -> None:
        if self.down:
            raise StoreUnavailable("injected outage")

    async def claim(self, key: str, *, lease: float, expires: float, holder: str = "") -> Claim:
        self._check()
        return await super().claim(key, lease=lease, expires=expires, holder=holder)

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        self.writes += 1
        self._check()
        if self.refuse is not None and key.startswith(self.refuse):
            raise StoreUnavailable("injected write failure")
        await super().complete(key, outcome, expires=expires)

    async def release(self, key: str, *, holder: str | None = None) -> None:
        self._check()
        await super().release(key, holder=holder)

    async def renew(self, key: str, *, lease: float) -> bool:
        self._check()
        return await super().renew(key, lease=lease)


def body(request_id: int, params: dict[str, Any]) -> bytes:
    meta = {"io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": ALL_CAPABILITIES}
    return msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                "params": {"name": "pay", **params, "_meta": meta}})


async def final_params(dispatcher: Dispatcher, invoice: str) -> dict[str, Any]:
    reply = await dispatcher.handle_bytes(body(1, {"arguments": {"invoice": invoice}}), PEER)
    assert reply is not None
    state = msgspec.json.decode(reply.body)["result"]["requestState"]
    return {"arguments": {"invoice": invoice}, "requestState": state, "inputResponses": CONFIRM}


async def send(dispatcher: Dispatcher, params: dict[str, Any], request_id: int = 2) -> Reply:
    reply = await dispatcher.handle_bytes(body(request_id, params), PEER)
    assert reply is not None
    return reply


def decoded(reply: Reply) -> dict[str, Any]:
    return msgspec.json.decode(reply.body)  # type: ignore[no-any-return]


def dispatcher_for(provider: Provider, store: Store) -> Dispatcher:
    return Dispatcher(shop(provider), sealer=Sealer(keys=[KEY], audience="shop"), store=store)


async def cancelled_inside_fn(dispatcher: Dispatcher, params: dict[str, Any]) -> None:
    """Send the final round and cancel it while `fn` runs, as a client disconnect does."""
    first = asyncio.ensure_future(send(dispatcher, params))
    await asyncio.sleep(0.05)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first


def test_25_a_request_cancelled_inside_fn_leaves_fn_running_and_the_retry_gets_its_value() -> None:
    provider = Provider(answer_after=0.3)
    dispatcher = dispatcher_for(provider, MemoryStore())

    async def main() -> tuple[float, dict[str, Any]]:
        params = await final_params(dispatcher, "INV-1")
        await cancelled_inside_fn(dispatcher, params)
        started = time.monotonic()
        retried = decoded(await send(dispatcher, params, 3))  # waits for the first run's fn
        return time.monotonic() - started, retried

    waited, retried = asyncio.run(main())
    assert retried["result"]["content"][0]["text"] == "paid R-INV-1-1"
    assert provider.charges == 1
    assert 0.1 < waited < 2  # it waited for fn's outcome: it did not run fn again


def test_25_a_cancelled_run_on_one_process_and_its_retry_on_another_charge_once(
    tmp_path: Path,
) -> None:
    provider = Provider(answer_after=0.3)
    stores = [SQLiteStore(tmp_path / "s.db"), SQLiteStore(tmp_path / "s.db")]
    one, two = (dispatcher_for(provider, store) for store in stores)

    async def main() -> list[dict[str, Any]]:
        params = await final_params(one, "INV-2")
        await cancelled_inside_fn(one, params)
        replies = [decoded(await send(two, params, 3)), decoded(await send(one, params, 4))]
        for store in stores:
            await store.aclose()
        return replies

    replies = asyncio.run(main())
    assert [r["result"]["content"][0]["text"] for r in replies] == ["paid R-INV-2-1"] * 2
    assert provider.charges == 1


def test_25_an_outcome_the_store_refuses_is_pending_never_success_then_rerun(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = Provider()
    store = FailingStore()
    dispatcher = dispatcher_for(provider, store)

    async def main() -> list[Reply]:
        params = await final_params(dispatcher, "INV-3")
        store.refuse = "once:"  # fn runs, then its outcome write fails
        with caplog.at_level(logging.ERROR, logger="mrtr.server"):
            failed = await send(dispatcher, params)
        during = await send(dispatcher, params, 3)  # a replay while it is still unrecorded
        store.refuse = None
        await asyncio.sleep(0.3)  # the background rewrite lands
        after = [await send(dispatcher, params, n) for n in (4, 5)]
        return [failed, during, *after]

    failed, during, *after = asyncio.run(main())
    for pending in (failed, during):
        assert pending.http_status == 503 and pending.headers == [(b"retry-after", b"2")]
        error = decoded(pending)["error"]
        assert error == {"code": -32603, "message": "Outcome pending",
                         "data": {"type": "outcome_pending", "retryAfter": 2.0}}
        assert isinstance(from_wire(error), OutcomePending)
    assert [decoded(r)["result"]["content"][0]["text"] for r in after] == ["paid R-INV-3-1"] * 2
    assert provider.charges == 1
    assert "not recorded yet" in caplog.text


def test_25_an_outage_after_fn_ran_answers_pending_and_recovery_replays_the_outcome() -> None:
    provider = Provider(answer_after=0.1)
    store = FailingStore()
    dispatcher = dispatcher_for(provider, store)

    async def main() -> list[Reply]:
        params = await final_params(dispatcher, "INV-4")
        first = asyncio.ensure_future(send(dispatcher, params))
        await asyncio.sleep(0.05)
        store.down = True  # the store goes away while fn runs
        failed = await first
        during = await send(dispatcher, params, 3)
        store.down = False
        await asyncio.sleep(0.5)
        return [failed, during, await send(dispatcher, params, 4)]

    failed, during, after = asyncio.run(main())
    assert failed.http_status == 503 and decoded(failed)["error"]["data"]["type"] == (
        "outcome_pending")
    assert during.http_status == 503 and during.headers  # retryable, never a second charge
    assert decoded(after)["result"]["content"][0]["text"] == "paid R-INV-4-1"
    assert provider.charges == 1


def test_25_a_round_outcome_the_store_refuses_is_pending_then_replayed() -> None:
    provider = Provider()
    store = FailingStore()
    dispatcher = dispatcher_for(provider, store)

    async def main() -> list[Reply]:
        params = await final_params(dispatcher, "INV-5")
        store.refuse = "round:"  # the handler (and its once) ran; the round's write fails
        failed = await send(dispatcher, params)
        during = await send(dispatcher, params, 3)
        store.refuse = None
        await asyncio.sleep(0.3)
        return [failed, during, await send(dispatcher, params, 4)]

    failed, during, after = asyncio.run(main())
    assert [failed.http_status, during.http_status] == [503, 503]
    assert decoded(after)["result"]["content"][0]["text"] == "paid R-INV-5-1"
    assert provider.charges == 1


def test_25_a_round_cancelled_while_its_outcome_is_written_still_records_it() -> None:
    provider = Provider()

    class SlowWrites(MemoryStore):
        async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
            if key.startswith("round:"):
                await asyncio.sleep(0.1)
            await super().complete(key, outcome, expires=expires)

    store = SlowWrites()
    dispatcher = dispatcher_for(provider, store)

    async def main() -> dict[str, Any]:
        params = await final_params(dispatcher, "INV-6")
        first = asyncio.ensure_future(send(dispatcher, params))
        await asyncio.sleep(0.05)  # the handler returned: its outcome is being written
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.sleep(0.3)
        round_keys = [k for k in store._entries if k.startswith("round:")]
        assert [await store.get(k) for k in round_keys][-1].status is ClaimStatus.DONE  # type: ignore[union-attr]
        return decoded(await send(dispatcher, params, 3))

    assert asyncio.run(main())["result"]["content"][0]["text"] == "paid R-INV-6-1"
    assert provider.charges == 1


def test_25_fn_that_raises_releases_its_claim_and_fn_cancelled_keeps_it() -> None:
    store = MemoryStore()
    ledger = Ledger(store, logging.getLogger("test"), lease=30, wait=5)
    deadline = time.time() + 60

    async def fails() -> str:
        raise RuntimeError("the provider refused")

    async def hangs() -> str:
        await asyncio.sleep(30)
        return "never"

    async def main() -> list[object]:
        with pytest.raises(RuntimeError):
            await ledger.once("f", "a", deadline, fails)
        released = await store.get("once:f:a")
        waiting = asyncio.ensure_future(ledger.once("f", "b", deadline, hangs))
        await asyncio.sleep(0.05)
        waiting.cancel()  # the request goes: fn goes on
        await asyncio.sleep(0.05)
        running = [await store.get("once:f:b"), waiting.cancelled()]
        for task in list(ledger._running.values()):  # the process stops: fn is cancelled
            task.cancel()
        await asyncio.sleep(0.05)
        return [released, *running, await store.get("once:f:b")]

    assert asyncio.run(main()) == [None, Claim(ClaimStatus.RUNNING), True,
                                   Claim(ClaimStatus.RUNNING)]  # kept until the lease lapses


def test_25_a_duplicate_still_running_past_the_wait_is_a_retryable_pending() -> None:
    store = MemoryStore()
    ledger = Ledger(store, logging.getLogger("test"), lease=30, wait=0.1)

    async def main() -> None:
        await store.claim("once:f:k", lease=30, expires=time.time() + 60)  # another process
        await ledger.once("f", "k", time.time() + 60, lambda: "x")

    with pytest.raises(OutcomePending) as caught:
        asyncio.run(main())
    assert caught.value.http_status == 503 and caught.value.retry_after == 2.0


def test_25_store_unavailable_is_a_retryable_503() -> None:
    error = StoreUnavailable("down")
    reply = Reply(4, error=error)
    assert (reply.http_status, reply.headers) == (503, [(b"retry-after", b"1")])
    assert decoded(reply)["error"] == {"code": -32603, "message": "Internal error"}


def test_25_drain_waits_for_background_once_work_and_says_when_some_is_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = Provider(answer_after=0.3)
    store = MemoryStore()
    dispatcher = dispatcher_for(provider, store)

    async def main() -> list[object]:
        params = await final_params(dispatcher, "INV-7")
        await cancelled_inside_fn(dispatcher, params)  # fn goes on in the background
        with caplog.at_level(logging.ERROR, logger="mrtr.server"):
            short = await dispatcher.drain(0.01)
        full = await dispatcher.drain(5)
        keys = [k for k in store._entries if k.startswith("once:")]
        return [short, full, await store.get(keys[0])]

    short, full, recorded = asyncio.run(main())
    assert (short, full) == (False, True)
    assert recorded == Claim(ClaimStatus.DONE, b'"R-INV-7-1"')
    assert "1 claims still held" in caplog.text
    assert asyncio.run(Dispatcher(shop(provider)).drain()) is True  # no store: nothing to wait


class LostAnswerStore(MemoryStore):
    """A MemoryStore whose next claim on a key starting with `lose` lands, but its answer is
    lost (the store timed out, as a Redis restarting under a slow fsync does), and which is
    `down` for a moment after it (a release then fails too)."""

    lose: str | None = None
    down = False

    async def claim(self, key: str, *, lease: float, expires: float, holder: str = "") -> Claim:
        if self.down:
            raise StoreUnavailable("injected outage")
        claim = await super().claim(key, lease=lease, expires=expires, holder=holder)
        if self.lose is not None and key.startswith(self.lose):
            self.lose, self.down = None, True
            raise StoreUnavailable("injected: the claim landed, its answer did not")
        return claim

    async def release(self, key: str, *, holder: str | None = None) -> None:
        if self.down:
            raise StoreUnavailable("injected outage")
        await super().release(key, holder=holder)


def test_25_a_claim_that_landed_unanswered_is_abandoned_and_the_retry_runs_fn_at_once() -> None:
    # Before the claim: the store fails while `once` claims, yet the claim landed. fn never ran,
    # so once the store is back the claim is dropped by its holder, and the retry runs fn now,
    # not after the 30 s lease (nor an outcome pending every few seconds until then).
    provider = Provider()
    store = LostAnswerStore()
    dispatcher = dispatcher_for(provider, store)

    async def main() -> tuple[int, str, float]:
        params = await final_params(dispatcher, "INV-8")
        store.lose = "once:"
        failed = await send(dispatcher, params)
        landed = [k for k in store._entries if k.startswith("once:")]
        assert landed and await store.get(landed[0]) == Claim(ClaimStatus.RUNNING)
        await asyncio.sleep(0.2)
        store.down = False  # the store is back: the background release lands
        await asyncio.sleep(0.3)
        started = time.monotonic()
        retried = await asyncio.wait_for(send(dispatcher, params, 3), 3)
        return (failed.http_status, decoded(retried)["result"]["content"][0]["text"],
                time.monotonic() - started)

    status, text, waited = asyncio.run(main())
    assert (status, text, provider.charges) == (503, "paid R-INV-8-1", 1)
    assert waited < 1.0


def test_25_a_claim_held_elsewhere_answers_outcome_pending_promptly_one_here_is_awaited() -> None:
    # Held by another process (maybe dead, its lease still running): the duplicate polls for
    # `poll` seconds, not `wait`, then gets the retryable answer; fn never runs. Held by fn
    # running in this process: the duplicate waits for fn's value, past `poll`.
    store = MemoryStore()
    ledger = Ledger(store, logging.getLogger("test"), lease=30, wait=60, poll=0.2)
    deadline = time.time() + 60
    ran: list[str] = []

    async def slow() -> str:
        ran.append("slow")
        await asyncio.sleep(0.5)
        return "slow value"

    async def main() -> list[object]:
        await store.claim("once:f:k", lease=30, expires=deadline, holder="other:1")
        started = time.monotonic()
        with pytest.raises(OutcomePending):
            await ledger.once("f", "k", deadline, lambda: ran.append("dup"))
        elsewhere = time.monotonic() - started
        first = asyncio.ensure_future(ledger.once("f", "here", deadline, slow))
        await asyncio.sleep(0.01)
        duplicate = await ledger.once("f", "here", deadline, lambda: ran.append("dup"))
        return [elsewhere < 1.0, await first, duplicate, await store.get("once:f:k")]

    assert asyncio.run(main()) == [True, (False, "slow value"), (True, "slow value"),
                                   Claim(ClaimStatus.RUNNING)]
    assert ran == ["slow"]
