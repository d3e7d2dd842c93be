"""RedisStore serves only a Redis that persists every write, unless the operator opts in (#25)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mrtr.stores import ClaimStatus, RedisStore, StoreUnavailable
from mrtr.stores._redis import split_opt_in
from tests.stores.conftest import REDIS_SERVER, start_redis, stop_redis

pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[tuple[Path, list[object]]]:
    """Start redis-servers in `tmp_path` with `launch(*extra, durable=...)`; stops them all."""
    started: list[object] = []
    yield tmp_path, started
    for process in started:
        stop_redis(process)  # type: ignore[arg-type]


def launch(redis: tuple[Path, list[object]], *extra: str, durable: bool) -> str:
    folder, started = redis
    process, url = start_redis(folder, durable=durable, extra=extra)
    started.append(process)
    return url


def claim(url: str) -> ClaimStatus:
    async def body() -> ClaimStatus:
        store = RedisStore(url, prefix=f"d{time.time_ns()}:")
        try:
            return (await store.claim("k", lease=5, expires=time.time() + 60)).status
        finally:
            await store.aclose()

    return asyncio.run(body())


def check(url: str) -> str:
    async def body() -> str:
        store = RedisStore(url)
        try:
            return await store.check()
        finally:
            await store.aclose()

    return asyncio.run(body())


def keys(url: str) -> list[bytes]:
    import redis as sync

    client = sync.Redis.from_url(split_opt_in(url)[0])
    try:
        return list(client.keys("*"))
    finally:
        client.close()


def test_a_redis_without_persistence_is_refused_and_nothing_is_written(redis: object) -> None:
    url = launch(redis, durable=False)  # type: ignore[arg-type]
    with pytest.raises(StoreUnavailable) as caught:
        claim(url)
    reason = caught.value.reason
    assert reason.startswith("redis claim: redis at 127.0.0.1:")
    assert "appendonly is no; save is empty" in reason and "allow_volatile=1" in reason
    assert keys(url) == []  # the refused claim was never sent


def test_snapshots_alone_are_not_durable(redis: object) -> None:
    url = launch(redis, "--save", "60 1", durable=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="save '60 1' snapshots lose the writes since the last"):
        check(url)


def test_the_operator_may_accept_a_volatile_redis_in_the_url(redis: object) -> None:
    url = launch(redis, durable=False)  # type: ignore[arg-type]
    assert claim(f"{url}?allow_volatile=1") is ClaimStatus.NEW
    assert check(f"{url}?allow_volatile=yes").endswith("; accepted by allow_volatile=1")
    with pytest.raises(ValueError, match="appendonly is no"):
        check(f"{url}?allow_volatile=0")


def test_an_append_only_redis_is_accepted(redis: object) -> None:
    url = launch(redis, durable=True)  # type: ignore[arg-type]
    assert check(url) == "appendonly yes, appendfsync everysec"
    assert claim(url) is ClaimStatus.NEW


def test_without_config_info_persistence_decides(redis: object) -> None:
    # A managed Redis often hides CONFIG; INFO persistence still tells whether AOF is on.
    hidden = ("--rename-command", "CONFIG", "")
    durable = launch(redis, *hidden, durable=True)  # type: ignore[arg-type]
    assert check(durable).startswith("aof_enabled:1 in INFO persistence (CONFIG GET refused")
    volatile = launch(redis, *hidden, durable=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="aof_enabled:0 in INFO persistence"):
        check(volatile)


def test_when_redis_hides_both_the_operator_must_opt_in(redis: object) -> None:
    url = launch(redis, "--rename-command", "CONFIG", "", "--rename-command", "INFO", "",
                 durable=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError) as caught:
        check(url)
    assert "its persistence is unknown: CONFIG GET refused" in str(caught.value)
    assert "INFO persistence refused" in str(caught.value)
    assert claim(f"{url}?allow_volatile=1") is ClaimStatus.NEW


def test_an_unreachable_redis_is_unavailable_not_refused() -> None:
    from tests.stores.conftest import free_port

    with pytest.raises(StoreUnavailable) as caught:
        check(f"redis://127.0.0.1:{free_port()}/0")
    assert caught.value.reason.startswith("checking persistence: ")
    assert "onnect" in caught.value.reason  # redis-py's "Error 111 connecting to ..."


def test_the_opt_in_leaves_the_rest_of_the_url_alone() -> None:
    assert split_opt_in("redis://h:1/0") == ("redis://h:1/0", False)
    assert split_opt_in("redis://:pw@h:1/2?allow_volatile=1&health_check_interval=5") == (
        "redis://:pw@h:1/2?health_check_interval=5", True)
    assert split_opt_in("unix:///run/redis.sock?db=3&allow_volatile=off") == (
        "unix:///run/redis.sock?db=3", False)
    with pytest.raises(ValueError, match="allow_volatile='maybe'"):
        RedisStore("redis://h/0?allow_volatile=maybe")
