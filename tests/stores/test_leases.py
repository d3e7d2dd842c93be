"""Tracked leases, purge and notifications on every Store (Memory, SQLite, a real redis-server):
what the task sweep and live continuation rely on (#28)."""

from __future__ import annotations

import asyncio
import time

from mrtr.stores import ClaimStatus, MemoryStore, SQLiteStore, Store
from tests.stores.conftest import Factory, later, run


def test_a_lapsed_tracked_lease_is_listed_until_claimed_again(make_store: Factory) -> None:
    async def body(store: Store) -> list[object]:
        await store.claim("task:a:run", lease=0.1, expires=later(), index="leases")
        await store.claim("task:b:run", lease=30, expires=later(), index="leases")
        await store.claim("task:c:run", lease=0.1, expires=later())  # not tracked
        before = await store.lapsed("leases", limit=10)
        await asyncio.sleep(0.3)
        other = make_store()  # another process sees the same index
        try:
            seen = [await store.lapsed("leases", limit=10), await other.lapsed("leases", limit=10)]
            taken = (await other.claim("task:a:run", lease=30, expires=later(),
                                       index="leases")).status
            return [before, *seen, taken, await store.lapsed("leases", limit=10)]
        finally:
            if other is not store:
                await other.aclose()

    assert run(make_store, body) == [[], ["task:a:run"], ["task:a:run"], ClaimStatus.NEW, []]


def test_renewing_with_the_index_keeps_a_lease_off_the_list(make_store: Factory) -> None:
    async def body(store: Store) -> list[object]:
        await store.claim("k", lease=0.2, expires=later(), index="ix")
        for _ in range(4):
            await asyncio.sleep(0.1)
            assert await store.renew("k", lease=0.2, index="ix")
        held = await store.lapsed("ix", limit=5)
        await asyncio.sleep(0.4)
        return [held, await store.lapsed("ix", limit=5)]

    assert run(make_store, body) == [[], ["k"]]


def test_released_done_and_expired_keys_leave_the_index(make_store: Factory) -> None:
    async def body(store: Store) -> list[str]:
        await store.claim("released", lease=0.05, expires=later(), index="ix")
        await store.claim("done", lease=0.05, expires=later(), index="ix")
        await store.claim("expired", lease=0.05, expires=later(0.15), index="ix")
        await store.claim("lapsed", lease=0.05, expires=later(), index="ix")
        await store.release("released", index="ix")
        await store.complete("done", b"x", expires=later())
        await asyncio.sleep(0.3)
        first = await store.lapsed("ix", limit=10)
        await store.release("lapsed", index="ix")
        return [*first, "|", *await store.lapsed("ix", limit=10)]

    assert run(make_store, body) == ["lapsed", "|"]


def test_lapsed_lists_earliest_first_and_at_most_limit(make_store: Factory) -> None:
    async def body(store: Store) -> list[list[str]]:
        for n, lease in enumerate((0.12, 0.04, 0.08)):
            await store.claim(f"k{n}", lease=lease, expires=later(), index="ix")
        await asyncio.sleep(0.3)
        return [await store.lapsed("ix", limit=2), await store.lapsed("ix", limit=10)]

    assert run(make_store, body) == [["k1", "k2"], ["k1", "k2", "k0"]]


def test_indexes_are_separate(make_store: Factory) -> None:
    async def body(store: Store) -> list[list[str]]:
        await store.claim("a", lease=0.05, expires=later(), index="one")
        await store.claim("b", lease=0.05, expires=later(), index="two")
        await asyncio.sleep(0.2)
        return [await store.lapsed("one", limit=5), await store.lapsed("two", limit=5),
                await store.lapsed("three", limit=5)]

    assert run(make_store, body) == [["a"], ["b"], []]


def test_a_notification_wakes_a_waiter_and_a_timeout_does_not(make_store: Factory) -> None:
    async def body(store: Store) -> list[object]:
        quiet = await store.wait("bell", timeout=0.2)
        waiting = asyncio.create_task(store.wait("bell", timeout=10))
        other_channel = asyncio.create_task(store.wait("other", timeout=0.5))
        await asyncio.sleep(0.2)  # subscribed (Redis)
        started = time.monotonic()
        await store.notify("bell")
        woke = await waiting
        return [quiet, woke, time.monotonic() - started < 1.0, await other_channel]

    assert run(make_store, body) == [False, True, True, False]


def test_redis_notifications_reach_another_client(redis_url: str) -> None:
    from mrtr.stores import RedisStore

    async def main() -> list[bool]:
        a, b = RedisStore(redis_url, prefix="n1:"), RedisStore(redis_url, prefix="n1:")
        try:
            waiting = asyncio.create_task(b.wait("bell", timeout=5))
            await asyncio.sleep(0.3)
            started = time.monotonic()
            await a.notify("bell")
            return [await waiting, time.monotonic() - started < 1.0]
        finally:
            await a.aclose()
            await b.aclose()

    assert asyncio.run(main()) == [True, True]


def test_purge_deletes_expired_entries_now(tmp_path: object) -> None:
    async def main(store: Store) -> list[int]:
        for n in range(5):
            await store.complete(f"k{n}", b"x", expires=later(0.05))
        await store.complete("kept", b"x", expires=later())
        await asyncio.sleep(0.2)
        return [await store.purge(most=3), await store.purge(most=100),
                await store.purge(most=100)]

    memory = MemoryStore()
    assert asyncio.run(main(memory)) == [3, 2, 0]
    assert len(memory) == 1
    sqlite = SQLiteStore(f"{tmp_path}/purge.db")

    async def with_sqlite() -> list[int]:
        try:
            return await main(sqlite)
        finally:
            await sqlite.aclose()

    assert asyncio.run(with_sqlite()) == [3, 2, 0]
