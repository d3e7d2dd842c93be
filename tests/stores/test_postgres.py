"""What only PostgresStore does, on a real PostgreSQL: the durability check, migrations that
replicas race to apply, notifications across clients, `mrtr store init` (#28)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

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
