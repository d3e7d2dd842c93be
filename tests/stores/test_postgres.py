"""What only PostgresStore does, on a real PostgreSQL: the durability check, migrations that
replicas race to apply, notifications across clients, `mrtr store init` (#28), a loop turn's
put_if_absent calls in one statement (#31)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from mrtr.cli import main
from mrtr.stores import ClaimStatus, PostgresStore, StoreUnavailable, store_from_url
from mrtr.stores._postgres_sql import VERSION
from tests.stores.conftest import POSTGRES_BIN, Postgres, later

pytestmark = pytest.mark.skipif(POSTGRES_BIN is None, reason="PostgreSQL is not installed")
_schemas = iter(range(10**6))


def schema() -> str:
    return f"p{next(_schemas)}_{time.time_ns()}"


async def fetch(url: str, query: str) -> list[object]:
    """The first column of `query`'s rows, on a connection of the test's own."""
    db = await asyncpg.connect(url)
    try:
        return [row[0] for row in await db.fetch(query)]
    finally:
        await db.close()


@pytest.fixture(scope="module")
def volatile_url() -> Iterator[str]:
    """A PostgreSQL running with fsync=off, as a throw-away container might."""
    server = Postgres(options=("-c", "fsync=off"))
    yield server.url
    server.stop()


def test_a_server_without_fsync_is_refused_and_nothing_is_created(volatile_url: str) -> None:
    async def body() -> tuple[str, object]:
        store = PostgresStore(f"{volatile_url}?schema=refused")
        try:
            with pytest.raises(StoreUnavailable) as refused:
                await store.claim("k", lease=30, expires=later())
        finally:
            await store.aclose()
        created = await fetch(volatile_url, "SELECT count(*) FROM pg_namespace"
                                            " WHERE nspname = 'refused'")
        return refused.value.reason, created[0]

    reason, created = asyncio.run(body())
    assert "fsync=off" in reason and "allow_volatile=1" in reason
    assert created == 0


def test_the_operator_may_accept_a_server_without_fsync(volatile_url: str) -> None:
    async def body() -> tuple[str, ClaimStatus]:
        store = store_from_url(f"{volatile_url}?schema=accepted&allow_volatile=1")
        assert isinstance(store, PostgresStore)
        try:
            return await store.check(), (await store.claim("k", lease=30,
                                                           expires=later())).status
        finally:
            await store.aclose()

    described, status = asyncio.run(body())
    assert described == "fsync off, synchronous_commit on; accepted by allow_volatile=1"
    assert status is ClaimStatus.NEW


def test_sessions_commit_synchronously_even_when_the_server_default_is_off(
        postgres_url: str) -> None:
    async def described(url: str) -> str:
        store = PostgresStore(url)
        try:
            return await store.check()
        finally:
            await store.aclose()

    url = f"{postgres_url}?schema={schema()}&options=-c%20synchronous_commit%3Doff"
    assert asyncio.run(described(url)) == "fsync on, synchronous_commit on"
    # the same sessions, left to the server's settings (the opt-in), would not wait for disk
    assert asyncio.run(described(url + "&allow_volatile=1")) == (
        "fsync on, synchronous_commit off; accepted by allow_volatile=1")


def test_replicas_opening_a_new_schema_together_migrate_it_once(postgres_url: str) -> None:
    name = schema()

    async def body() -> tuple[list[str], list[object]]:
        stores = [PostgresStore(f"{postgres_url}?schema={name}") for _ in range(6)]
        try:
            claims = await asyncio.gather(*(s.claim("race", lease=30, expires=later())
                                            for s in stores))
        finally:
            for s in stores:
                await s.aclose()
        versions = await fetch(postgres_url, f"SELECT version FROM {name}.mrtr_schema")
        return sorted(c.status.value for c in claims), versions

    claims, versions = asyncio.run(body())
    assert claims == ["new"] + ["running"] * 5
    assert versions == list(range(1, VERSION + 1))


def test_notify_wakes_a_waiter_of_another_client_within_milliseconds(postgres_url: str) -> None:
    name = schema()

    async def body() -> tuple[bool, float, bool]:
        waiter = PostgresStore(f"{postgres_url}?schema={name}")
        sender = PostgresStore(f"{postgres_url}?schema={name}")
        try:
            await waiter.wait("warm", timeout=0.01)  # the listening connection is open
            waiting = asyncio.ensure_future(waiter.wait("task:1", timeout=5))
            await asyncio.sleep(0.05)
            started = time.monotonic()
            await sender.notify("task:1")
            woken = await waiting
            took = time.monotonic() - started
            other = await waiter.wait("task:2", timeout=0.2)  # another channel: not woken
            return woken, took, other
        finally:
            await waiter.aclose()
            await sender.aclose()

    woken, took, other = asyncio.run(body())
    assert woken and took < 0.5 and not other


def test_an_answer_wakes_its_collector_by_notification_not_by_polling(postgres_url: str) -> None:
    name = schema()

    async def body() -> tuple[bytes | None, float]:
        collector = PostgresStore(f"{postgres_url}?schema={name}")
        sender = PostgresStore(f"{postgres_url}?schema={name}")
        try:
            await collector.collect("warm", timeout=0.01)
            waiting = asyncio.ensure_future(collector.collect("answer:1", timeout=10))
            await asyncio.sleep(0.2)  # past its first look: it waits for a notification
            started = time.monotonic()
            await sender.deliver("answer:1", b"yes", expires=later())
            found = await waiting
            return found, time.monotonic() - started
        finally:
            await collector.aclose()
            await sender.aclose()

    found, took = asyncio.run(body())
    assert found == b"yes" and took < 0.5  # polling would take up to 1 s


def test_an_unreachable_server_is_store_unavailable_quickly() -> None:
    async def body() -> float:
        store = PostgresStore("postgresql://nobody@127.0.0.1:1/none", timeout=0.5)
        started = time.monotonic()
        try:
            with pytest.raises(StoreUnavailable):
                await store.claim("k", lease=30, expires=later())
            assert not await store.wait("c", timeout=0.1)  # never raises
        finally:
            await store.aclose()
        return time.monotonic() - started

    assert asyncio.run(body()) < 3.0


def test_a_schema_name_is_an_identifier() -> None:
    with pytest.raises(ValueError, match="schema='x;drop'"):
        PostgresStore("postgresql://h/db?schema=x;drop")


def test_store_init_creates_the_schema_once_and_says_so(
        postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"{postgres_url}?schema={schema()}"
    assert main(["store", "init", url]) == 0
    first = capsys.readouterr().out
    assert main(["store", "init", url]) == 0
    again = capsys.readouterr().out
    assert main(["store", "init", "postgresql://nobody@127.0.0.1:1/none"]) == 1
    assert main(["store", "init", "memory:"]) == 0
    assert f"version {VERSION} (created); fsync on" in first
    assert f"version {VERSION} (already current)" in again


def test_mrtr_serve_refuses_a_server_without_fsync_before_any_worker_starts(
        volatile_url: str) -> None:
    from mrtr.serving._stores import run_store

    with pytest.raises(ValueError, match=r"store postgresql://\*\*\*@127.0.0.1:\d+/postgres"
                                         r"\?schema=s: postgresql runs with fsync=off"):
        with run_store(f"{volatile_url}?schema=s", workers=3):
            pass
    with run_store(f"{volatile_url}?schema=s&allow_volatile=1", workers=3) as url:
        assert url.endswith("allow_volatile=1")


# -- a loop turn's put_if_absent calls in one statement (_put_batches.py) ---------------------

def test_a_turn_of_puts_is_one_statement_and_every_row_is_stored(postgres_url: str) -> None:
    async def body() -> tuple[list[ClaimStatus], int, list[Any]]:
        store = PostgresStore(f"{postgres_url}?schema={schema()}")
        statements = 0
        run = store._run

        async def counted(what: str, work: Any) -> Any:
            nonlocal statements
            statements += what == "put_if_absent"
            return await run(what, work)

        store._run = counted  # type: ignore[method-assign]
        try:
            await store.check()
            claims = await asyncio.gather(*(store.put_if_absent(f"round:{i}", b"o%d" % i,
                                                                expires=later())
                                            for i in range(32)))
            got = [await store.get(f"round:{i}") for i in range(32)]
            return [c.status for c in claims], statements, got
        finally:
            await store.aclose()

    statuses, statements, got = asyncio.run(body())
    assert statuses == [ClaimStatus.NEW] * 32 and statements == 1
    assert [(c.status, c.outcome) for c in got] == [(ClaimStatus.DONE, b"o%d" % i)
                                                    for i in range(32)]


def test_two_replicas_putting_shared_keys_in_opposite_orders_never_deadlock(
        postgres_url: str) -> None:
    """Without the key order the two statements wait for each other's rows (PostgreSQL aborts
    one after deadlock_timeout, and its callers get StoreUnavailable)."""
    name = schema()

    async def body() -> list[int]:
        one = PostgresStore(f"{postgres_url}?schema={name}", timeout=10)
        two = PostgresStore(f"{postgres_url}?schema={name}", timeout=10)
        new_per_key: list[int] = []
        try:
            await one.check()
            await two.check()
            for attempt in range(4):
                keys = [f"round:{attempt}:{i:03d}" for i in range(200)]
                claims = await asyncio.gather(
                    *(one.put_if_absent(k, b"one", expires=later()) for k in keys),
                    *(two.put_if_absent(k, b"two", expires=later()) for k in reversed(keys)))
                for k in keys:
                    mine = [c for c, key in zip(claims, keys + keys[::-1], strict=True)
                            if key == k]
                    new_per_key.append(sum(c.status is ClaimStatus.NEW for c in mine))
        finally:
            await one.aclose()
            await two.aclose()
        return new_per_key

    assert asyncio.run(body()) == [1] * 800


def test_a_batch_that_cannot_commit_in_time_writes_none_of_its_rows(postgres_url: str) -> None:
    """A row held by another transaction stalls the statement past the store's timeout: every
    caller of that batch gets StoreUnavailable, and the other rows are not written either."""
    name = schema()

    async def body() -> tuple[list[BaseException | object], list[object]]:
        store = PostgresStore(f"{postgres_url}?schema={name}", timeout=0.5)
        blocker = await asyncpg.connect(postgres_url)
        try:
            await store.check()
            await blocker.execute(f"SET search_path = {name}")
            await blocker.execute("BEGIN")
            await blocker.execute("INSERT INTO mrtr_entries VALUES ($1, $2, 0.0, $3)",
                                  b"round:held", b"x", later())
            started = time.monotonic()
            results = await asyncio.gather(
                *(store.put_if_absent(k, b"o", expires=later())
                  for k in ("round:a", "round:held", "round:z")), return_exceptions=True)
            assert time.monotonic() - started < 3
            await blocker.execute("ROLLBACK")
            stored = [await store.get(k) for k in ("round:a", "round:held", "round:z")]
            return results, stored
        finally:
            await blocker.close()
            await store.aclose()

    results, stored = asyncio.run(body())
    assert all(isinstance(r, StoreUnavailable) for r in results)
    assert stored == [None, None, None]


def test_closing_the_store_writes_the_batch_in_flight(postgres_url: str) -> None:
    name = schema()

    async def body() -> tuple[ClaimStatus, Any]:
        store = PostgresStore(f"{postgres_url}?schema={name}")
        await store.check()
        putting = asyncio.ensure_future(store.put_if_absent("round:last", b"o", expires=later()))
        await asyncio.sleep(0)
        await store.aclose()
        claim = await putting
        again = PostgresStore(f"{postgres_url}?schema={name}")
        try:
            return claim.status, await again.get("round:last")
        finally:
            await again.aclose()

    status, stored = asyncio.run(body())
    assert status is ClaimStatus.NEW and stored.status is ClaimStatus.DONE


def test_31_slots_a_version_1_schema_holds_are_counted_once_after_the_upgrade(
        postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Version 2 keeps each key's total (mrtr_slot_totals) instead of summing its members on
    # every admit (3 ms at 10,000 members); members written under version 1 have no total yet.
    from mrtr.stores._postgres_sql import MIGRATIONS

    name, now = schema(), time.time()

    async def body() -> list[object]:
        db = await asyncpg.connect(postgres_url)
        try:
            await db.execute(f'CREATE SCHEMA "{name}"; SET search_path = "{name}";'
                             " CREATE TABLE mrtr_schema (version integer NOT NULL);"
                             " INSERT INTO mrtr_schema VALUES (1);" + MIGRATIONS[0])
            await db.executemany("INSERT INTO mrtr_slots VALUES ($1, $2, $3, $4)", [
                (b"k", b"a", 2, now + 60), (b"k", b"b", 3, now + 0.4), (b"k", b"old", 5, now - 1),
                (b"gone", b"x", 1, now - 1)])
        finally:
            await db.close()
        url = f"{postgres_url}?schema={name}"
        assert await asyncio.to_thread(main, ["store", "init", url]) == 0  # 1 -> 2
        store = PostgresStore(url)
        try:
            seen: list[object] = [await store.admitted("k"),
                                  await store.admit("k", "c", limit=5, expires=later()),
                                  await store.admit("k", "c", limit=6, expires=later())]
            await asyncio.sleep(0.5)  # b lapses
            await store.purge(most=100)  # (the store's own first sweep may have come first)
            seen += [await store.admitted("k"), await fetch(
                postgres_url, f"SELECT count(*) FROM \"{name}\".mrtr_slots WHERE key = 'gone'")]
            await store.dismiss("k", "a")
            seen += [await store.admitted("k"), await store.admit("k", "d", limit=2,
                                                                  expires=later())]
            seen.append(await fetch(postgres_url, f'SELECT total FROM "{name}".mrtr_slot_totals'))
            return seen
        finally:
            await store.aclose()

    # the sweep takes "gone"'s lapsed member (a key with no total yet); "old" went at k's count
    assert asyncio.run(body()) == [5, False, True, 3, [0], 1, True, [2]]
    assert f"version {VERSION} (upgraded from version 1)" in capsys.readouterr().out


def test_31_slots_on_postgresql_answer_as_the_memory_store_does(postgres_url: str) -> None:
    from hypothesis import given, settings

    from mrtr.stores import MemoryStore
    from tests.stores.test_sqlite_slots import _OPS, Clock, _replay

    url, keys = f"{postgres_url}?schema={schema()}", iter(range(10**6))

    @settings(max_examples=30, deadline=None)
    @given(ops=_OPS)
    def check(ops: list[tuple[Any, ...]]) -> None:
        prefix = f"e{next(keys)}-"  # one schema for every example: keys of their own
        ops = [(op[0], prefix + op[1], *op[2:]) if op[0] in ("admit", "dismiss", "admitted")
               else op for op in ops]
        memory_clock, clock = Clock(), Clock()
        expected = asyncio.run(_replay(MemoryStore(clock=memory_clock), memory_clock, ops,
                                       keys=(prefix + "k", prefix + "q")))

        async def on_postgres() -> list[object]:
            store = PostgresStore(url, clock=clock, sweep_every=10**9)
            try:
                return await _replay(store, clock, ops, keys=(prefix + "k", prefix + "q"))
            finally:
                await store.aclose()

        assert asyncio.run(on_postgres()) == expected

    check()


def test_31_a_total_left_too_high_by_a_version_1_replica_is_counted_again_on_a_refusal(
        postgres_url: str) -> None:
    # A replica of version 1 in a rolling upgrade dismisses by deleting the member row only.
    from tests.stores.test_sqlite_slots import HEALED, Clock, after_a_lost_dismissal

    name, clock = schema(), Clock()

    async def lose() -> None:
        await fetch(postgres_url, f"DELETE FROM \"{name}\".mrtr_slots WHERE member = 'a'"
                    " RETURNING 1")

    async def body() -> list[object]:
        store = PostgresStore(f"{postgres_url}?schema={name}", clock=clock, sweep_every=10**9)
        try:
            return await after_a_lost_dismissal(store, clock, lose)
        finally:
            await store.aclose()

    assert asyncio.run(body()) == HEALED
