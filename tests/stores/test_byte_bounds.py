"""Byte bounds in the stores (#26): weighted slots (a byte quota) on Memory, SQLite and a real
redis-server, and the memory store's byte budget."""

from __future__ import annotations

import asyncio
import time

import pytest

from mrtr.stores import (
    Claim,
    ClaimStatus,
    MemoryStore,
    RedisStore,
    Store,
    StoreUnavailable,
    store_from_url,
)
from tests.stores.conftest import Factory, later, run


# -- weighted slots: a byte quota, atomic on every store ------------------------------------------
def test_26_weighted_admit_holds_a_byte_limit(make_store: Factory) -> None:
    async def body(store: Store) -> list[object]:
        seen: list[object] = []
        for member, weight in (("a", 400), ("b", 400), ("c", 300)):
            seen.append(await store.admit("q", member, limit=1000, expires=later(),
                                          weight=weight))
        seen.append(await store.admitted("q"))  # c was refused: it took nothing
        seen.append(await store.admit("q", "c", limit=1000, expires=later(), weight=200))
        seen.append(await store.admitted("q"))
        seen.append(await store.admit("q", "a", limit=1000, expires=later(), weight=100))
        seen.append(await store.admitted("q"))  # a weighs 100 now
        seen.append(await store.admit("q", "a", limit=1000, expires=later(), weight=400))
        seen.append(await store.admit("q", "a", limit=1000, expires=later(), weight=401))
        seen.append(await store.admitted("q"))  # the refused reweighing changed nothing
        await store.dismiss("q", "b")
        seen.append(await store.admitted("q"))
        seen.append(await store.admit("q", "a", limit=500, expires=later(), weight=10))
        seen.append(await store.admitted("q"))  # lighter always fits, even under a lower limit
        return seen

    assert run(make_store, body) == [True, True, False, 800, True, 1000, True, 700,
                                     True, False, 1000, 600, True, 210]


def test_26_a_weighted_slot_frees_its_weight_when_it_lapses(make_store: Factory) -> None:
    async def body(store: Store) -> list[object]:
        await store.admit("q", "short", limit=100, expires=later(0.15), weight=60)
        await store.admit("q", "long", limit=100, expires=later(), weight=30)
        full = await store.admit("q", "big", limit=100, expires=later(), weight=50)
        await asyncio.sleep(0.3)
        return [full, await store.admitted("q"),
                await store.admit("q", "big", limit=100, expires=later(), weight=50),
                await store.admitted("q")]

    assert run(make_store, body) == [False, 30, True, 80]


def test_26_concurrent_weighted_admits_from_separate_clients_never_pass_the_limit(
    make_store: Factory,
) -> None:
    async def body(_: Store) -> tuple[int, int]:
        stores = [make_store() for _ in range(4)]
        try:
            granted = await asyncio.gather(*(
                stores[n % 4].admit("q", f"m{n}", limit=500, expires=later(), weight=7)
                for n in range(200)))
            return sum(granted), await stores[0].admitted("q")
        finally:
            for s in stores:
                await s.aclose()

    granted, total = run(make_store, body)
    print(f"\nweighted admit: 200 x 7 bytes from 4 clients, limit 500 -> {granted} granted")
    assert (granted, total) == (71, 497)


def test_26_redis_sets_from_before_weights_count_each_member_once(redis_url: str) -> None:
    import redis.asyncio as redis

    prefix = f"legacy{time.time_ns()}:"

    async def body() -> list[object]:
        raw = redis.Redis.from_url(redis_url)
        store = RedisStore(redis_url, prefix=prefix)
        try:  # two live tasks admitted by a version without weights: a bare sorted set
            await raw.zadd(prefix + "z:tasks", {"t1": later(), "t2": later()})
            seen: list[object] = [await store.admitted("tasks")]
            seen.append(await store.admit("tasks", "t3", limit=3, expires=later()))
            seen.append(await store.admit("tasks", "t4", limit=3, expires=later()))
            await store.dismiss("tasks", "t1")
            seen.append(await store.admitted("tasks"))
            seen.append(await store.admit("tasks", "t4", limit=3, expires=later()))
            return seen
        finally:
            await store.aclose()
            await raw.aclose()

    assert asyncio.run(body()) == [2, True, False, 2, True]


# -- the memory store's byte budget --------------------------------------------------------------
def test_26_memory_store_refuses_writes_past_max_bytes_and_evicts_nothing() -> None:
    now = [1000.0]
    store = MemoryStore(clock=lambda: now[0], max_bytes=10_000)

    async def body() -> list[object]:
        seen: list[object] = []
        await store.claim("round:a", lease=30, expires=1010.0)
        await store.complete("round:a", b"x" * 4000, expires=1010.0)
        await store.complete("task:b", b"y" * 4000, expires=1100.0)
        with pytest.raises(StoreUnavailable) as full:
            await store.complete("task:c", b"z" * 4000, expires=1100.0)
        seen.append(full.value.reason)
        seen.append(await store.get("round:a"))  # nothing was evicted to make room
        seen.append(await store.get("task:b") is not None)
        await store.complete("task:b", b"y" * 100, expires=1100.0)  # a smaller value fits
        seen.append(store.held_bytes)
        now[0] = 1011.0  # round:a expires: its bytes make room
        await store.complete("task:c", b"z" * 4000, expires=1100.0)
        seen.append(store.held_bytes)
        return seen

    seen = asyncio.run(body())
    assert seen[0].startswith("memory store full (8013 bytes held, 4006 more would pass "
                              "max_bytes=10000")
    assert seen[1:] == [Claim(ClaimStatus.DONE, b"x" * 4000), True, 4000 + 7 + 100 + 6,
                        100 + 6 + 4000 + 6]


def test_26_memory_store_claims_leave_room_for_outcomes_of_running_work() -> None:
    store = MemoryStore(max_bytes=8000)

    async def body() -> list[object]:
        claimed = [await store.claim(f"round:{n}", lease=30, expires=later()) for n in range(3)]
        await store.complete("big", b"b" * 6990, expires=later())  # past 7/8 of 8000
        seen: list[object] = [claimed == [Claim(ClaimStatus.NEW)] * 3, store.held_bytes]
        with pytest.raises(StoreUnavailable) as refused:  # new work: no longer
            await store.claim("round:new", lease=30, expires=later())
        seen.append("7/8 of max_bytes=8000" in refused.value.reason)
        await store.complete("round:0", b"o" * 900, expires=later())  # running work finishes
        seen.append(await store.get("round:0") == Claim(ClaimStatus.DONE, b"o" * 900))
        return seen

    assert asyncio.run(body()) == [True, 7 * 3 + 6993, True, True]


def test_26_memory_store_frees_the_bytes_it_drops() -> None:
    now = [1000.0]
    store = MemoryStore(clock=lambda: now[0])

    async def body() -> list[int]:
        seen: list[int] = []
        await store.claim("claim", lease=30, expires=1500.0)
        await store.release("claim")
        await store.deliver("box", b"m" * 500, expires=1500.0)
        await store.collect("box", timeout=0.1)
        for n in range(300):  # slots with weights, dismissed or lapsing
            await store.admit("quota", f"blob{n}", limit=10**9, expires=1100.0 + n, weight=9)
        seen.append(await store.admitted("quota"))
        for n in range(0, 300, 2):
            await store.dismiss("quota", f"blob{n}")
        seen.append(await store.admitted("quota"))
        now[0] = 1300.0
        seen.append(await store.admitted("quota"))  # members lapse in deadline order
        await store.add("counter", 1, expires=1400.0)
        now[0] = 2000.0
        for n in range(200):
            await store.complete(f"k{n}", b"v", expires=2001.0)
        now[0] = 3000.0
        await store.get("nothing")
        await store.complete("last", b"", expires=3001.0)
        await store.complete("last2", b"", expires=3001.0)
        for _ in range(10):
            await store.complete("last", b"", expires=3001.0)
        seen.append(store.held_bytes)
        return seen

    assert asyncio.run(body()) == [2700, 1350, 450, len("last") + len("last2")]


def test_26_memory_url_sets_the_byte_budget_and_entry_cap() -> None:
    store = store_from_url("memory:?max_bytes=64M&max_entries=5000")
    assert isinstance(store, MemoryStore)
    assert (store.max_bytes, store.max_entries) == (64 * 1024 * 1024, 5000)
    plain = store_from_url("memory:")
    assert isinstance(plain, MemoryStore) and plain.max_bytes == 256 * 1024 * 1024
    assert store_from_url("memory://?max_bytes=1500").max_bytes == 1500  # type: ignore[attr-defined]
    for bad, said in (("memory:?max_bytes=0", "positive whole number"),
                      ("memory:?max_bytes=lots", "positive whole number"),
                      ("memory:?size=1", "unknown memory store option 'size'")):
        with pytest.raises(ValueError, match=said):
            store_from_url(bad)
    with pytest.raises(ValueError, match="max_bytes"):
        MemoryStore(max_bytes=0)
