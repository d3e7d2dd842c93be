"""A real redis-server on a free 127.0.0.1 port for the store tests, stopped by its PID."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from mrtr.stores import MemoryStore, RedisStore, SQLiteStore, Store

REDIS_SERVER = shutil.which("redis-server") or next(
    (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if Path(p).is_file()), None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_redis(tmp: Path, *, durable: bool = True, port: int | None = None,
                extra: Sequence[str] = ()) -> tuple[subprocess.Popen[bytes], str]:
    """Start redis-server and wait until it accepts connections. `durable`: an append-only
    file (what RedisStore requires); else no persistence at all, as a bare container runs it.
    `extra` arguments go last (they win)."""
    assert REDIS_SERVER is not None
    port = port or free_port()
    persistence = ["--appendonly", "yes"] if durable else ["--appendonly", "no"]
    with (tmp / "redis.log").open("ab") as log:
        process = subprocess.Popen(
            [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
             *persistence, "--dir", str(tmp), *extra],
            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"redis-server did not start: {(tmp / 'redis.log').read_text()}")


def stop_redis(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run does)")
    process, url = start_redis(tmp_path_factory.mktemp("redis"))
    yield url
    stop_redis(process)


T = TypeVar("T")
Factory = Callable[[], Store]
_names = itertools.count()


@pytest.fixture(params=["memory", "sqlite", "redis"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """A factory of store clients that all see the same data (one dict, one file, one Redis),
    for the contract tests of every store."""
    if request.param == "memory":
        shared = MemoryStore()
        yield lambda: shared
    elif request.param == "sqlite":
        path = tmp_path / "store.db"
        yield lambda: SQLiteStore(path)
    else:
        url = request.getfixturevalue("redis_url")
        prefix = f"t{next(_names)}-{time.time_ns()}:"
        yield lambda: RedisStore(url, prefix=prefix)


def run(make: Factory, body: Callable[[Store], Awaitable[T]]) -> T:
    """`body` on a fresh store client from `make`, closed afterwards."""
    async def main() -> T:
        store = make()
        try:
            return await body(store)
        finally:
            await store.aclose()

    return asyncio.run(main())


def later(seconds: float = 60.0) -> float:
    return time.time() + seconds
