"""What only RedisStore does, on a real redis-server: a loop turn's put_if_absent calls in one
pipeline (#31). Durability checks are in test_durable.py, the contract in test_contract.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from mrtr.stores import ClaimStatus, RedisStore, StoreUnavailable
from mrtr.stores._store import NEW
from tests.stores.conftest import REDIS_SERVER, later, start_redis, stop_redis

pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
_prefixes = iter(range(10**6))


def store(url: str, **options: Any) -> tuple[RedisStore, list[int]]:
    """A store under a prefix of its own, and the row counts of the pipelines it sent."""
    made = RedisStore(url, prefix=f"t{next(_prefixes)}_{time.time_ns()}:", **options)
    pipelines: list[int] = []
    evalsha = made._evalsha

    async def counted(rows: list[tuple[bytes, bytes, int]]) -> list[Any]:
        pipelines.append(len(rows))
        return await evalsha(rows)

    made._evalsha = counted  # type: ignore[method-assign]
    return made, pipelines


async def warm(redis: RedisStore, pipelines: list[int]) -> None:
    """One batch, so Redis has the put script (a new Redis loads it at the first NOSCRIPT)."""
    await asyncio.gather(*(redis.put_if_absent(f"warm:{i}", b"w", expires=later())
                           for i in range(2)))
    pipelines.clear()


def test_a_turn_of_puts_is_one_pipeline_and_every_row_is_stored(redis_url: str) -> None:
    async def body() -> tuple[list[ClaimStatus], list[int], list[Any]]:
        redis, pipelines = store(redis_url)
        try:
            await warm(redis, pipelines)
            claims = await asyncio.gather(*(redis.put_if_absent(f"round:{i}", b"o%d" % i,
                                                                expires=later())
                                            for i in range(32)))
            got = [await redis.get(f"round:{i}") for i in range(32)]
            return [c.status for c in claims], pipelines, got
        finally:
            await redis.aclose()

    statuses, pipelines, got = asyncio.run(body())
    assert statuses == [ClaimStatus.NEW] * 32 and pipelines == [32]
    assert [(c.status, c.outcome) for c in got] == [(ClaimStatus.DONE, b"o%d" % i)
                                                    for i in range(32)]


def test_a_put_alone_in_its_turn_is_the_scripts_own_call(redis_url: str) -> None:
    async def body() -> tuple[ClaimStatus, ClaimStatus, bytes | None, list[int]]:
        redis, pipelines = store(redis_url)
        try:
            first = await redis.put_if_absent("round:1", b"one", expires=later())
            again = await redis.put_if_absent("round:1", b"two", expires=later())
            return first.status, again.status, again.outcome, pipelines
        finally:
            await redis.aclose()

    assert asyncio.run(body()) == (ClaimStatus.NEW, ClaimStatus.DONE, b"one", [])


def test_rows_redis_had_no_script_for_are_written_once_it_is_loaded_again(
        tmp_path: Path) -> None:
    """A Redis restarted or `SCRIPT FLUSH`ed forgets the put script: the pipeline's rows come
    back NOSCRIPT (nothing written), and go again once the script is loaded."""
    process, url = start_redis(tmp_path)

    async def body() -> tuple[list[ClaimStatus], list[int], list[Any]]:
        redis, pipelines = store(url)
        try:
            await warm(redis, pipelines)
            await redis._redis.script_flush()
            claims = await asyncio.gather(*(redis.put_if_absent(f"round:{i}", b"o", expires=later())
                                            for i in range(5)))
            got = [await redis.get(f"round:{i}") for i in range(5)]
            return [c.status for c in claims], pipelines, got
        finally:
            await redis.aclose()

    try:
        statuses, pipelines, got = asyncio.run(body())
    finally:
        stop_redis(process)
    assert statuses == [ClaimStatus.NEW] * 5 and pipelines == [5, 5]
    assert all(c is not None and c.outcome == b"o" for c in got)


def test_a_row_redis_refuses_fails_its_own_caller_and_the_others_are_written(
        redis_url: str) -> None:
    async def body() -> tuple[list[BaseException | object], Any]:
        redis, _ = store(redis_url)
        try:
            await redis._redis.hset(redis._prefix + "round:bad", "field", "a hash, not a string")
            found = await asyncio.gather(
                redis.put_if_absent("round:ok", b"o", expires=later()),
                redis.put_if_absent("round:bad", b"o", expires=later()), return_exceptions=True)
            return found, await redis.get("round:ok")
        finally:
            await redis.aclose()

    (ok, bad), stored = asyncio.run(body())
    assert ok == NEW and stored.outcome == b"o"
    assert isinstance(bad, StoreUnavailable) and "WRONGTYPE" in bad.reason


def test_a_redis_that_does_not_answer_fails_every_caller_of_the_batch_quickly() -> None:
    async def body() -> tuple[list[BaseException | object], float]:
        redis, _ = store("redis://127.0.0.1:1/0?allow_volatile=1", timeout=0.5)
        started = time.monotonic()
        try:
            found = await asyncio.gather(*(redis.put_if_absent(f"round:{i}", b"o",
                                                               expires=later())
                                           for i in range(3)), return_exceptions=True)
            return found, time.monotonic() - started
        finally:
            await redis.aclose()

    found, took = asyncio.run(body())
    assert all(isinstance(f, StoreUnavailable) and "redis put_if_absent" in f.reason
               for f in found)
    assert took < 3


def test_closing_the_store_writes_the_batch_in_flight(redis_url: str) -> None:
    prefix = f"close{time.time_ns()}:"

    async def body() -> tuple[ClaimStatus, Any]:
        redis = RedisStore(redis_url, prefix=prefix)
        await redis.check()
        putting = [asyncio.ensure_future(redis.put_if_absent(f"round:{i}", b"o",
                                                             expires=later()))
                   for i in range(2)]
        await asyncio.sleep(0)
        await redis.aclose()
        claims = await asyncio.gather(*putting)
        again = RedisStore(redis_url, prefix=prefix)
        try:
            return claims[0].status, await again.get("round:1")
        finally:
            await again.aclose()

    status, stored = asyncio.run(body())
    assert status is ClaimStatus.NEW and stored.status is ClaimStatus.DONE
