"""A real redis-server and a real PostgreSQL on free 127.0.0.1 ports for the store tests, each
stopped by its PID."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from mrtr.stores import MemoryStore, PostgresStore, RedisStore, SQLiteStore, Store

REDIS_SERVER = shutil.which("redis-server") or next(
    (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if Path(p).is_file()), None)

POSTGRES_BIN = next((Path(f"/usr/lib/postgresql/{v}/bin") for v in ("17", "16", "15")
                     if (Path(f"/usr/lib/postgresql/{v}/bin") / "postgres").is_file()), None)


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


class Postgres:
    """A PostgreSQL server of its own: initdb in a temp dir (owned by the `postgres` system
    user when we are root, as the server refuses to run as root), on a free port, its unix
    socket in that dir, trust authentication on 127.0.0.1 only. `stop()` ends it by its PID."""

    def __init__(self, *, options: Sequence[str] = ()) -> None:
        assert POSTGRES_BIN is not None
        self.folder = Path(tempfile.mkdtemp(prefix="mrtr-pg-"))
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.folder, "postgres")
        data = self.folder / "data"
        subprocess.run([*self._as, str(POSTGRES_BIN / "initdb"), "-D", str(data), "-U",
                        "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
                       check=True, capture_output=True)
        self._options = options
        self._start()

    def _start(self) -> None:
        assert POSTGRES_BIN is not None
        with (self.folder / "postgres.log").open("ab") as log:
            self.process = subprocess.Popen(
                [*self._as, str(POSTGRES_BIN / "postgres"), "-D", str(self.folder / "data"),
                 "-p", str(self.port), "-k", str(self.folder), "-c",
                 "listen_addresses=127.0.0.1", "-c", "max_connections=200", *self._options],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if subprocess.run([str(POSTGRES_BIN / "pg_isready"), "-q", "-h", "127.0.0.1", "-p",
                               str(self.port)]).returncode == 0:
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        log_text = (self.folder / "postgres.log").read_text()
        self.stop()
        raise RuntimeError(f"postgres did not start: {log_text}")

    def crash(self) -> None:
        """Immediate shutdown (SIGQUIT): no checkpoint, crash recovery on the next start, and
        every connection cut, as when the server's machine fails."""
        os.kill(self._pid(), signal.SIGQUIT)
        self.process.wait(timeout=20)

    def restart(self) -> None:
        self._start()

    def _pid(self) -> int:
        return int((self.folder / "data" / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        """Fast shutdown (SIGINT) of the postmaster by the PID in postmaster.pid."""
        try:
            os.kill(self._pid(), signal.SIGINT)
        except (OSError, ValueError, IndexError):
            self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    if POSTGRES_BIN is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    server = Postgres()
    yield server.url
    server.stop()


T = TypeVar("T")
Factory = Callable[[], Store]
_names = itertools.count()


# The SQLite schema as stores made it before #31 (entries WITHOUT ROWID): a file made then keeps
# it, and the contract runs on it too ("sqlite-before").
SQLITE_BEFORE_31 = (
    "CREATE TABLE mrtr_entries (key TEXT PRIMARY KEY, outcome BLOB, lease_until REAL NOT NULL,"
    " expires REAL NOT NULL, count INTEGER, holder TEXT) WITHOUT ROWID",
    "CREATE INDEX mrtr_entries_expires ON mrtr_entries (expires)",
    "CREATE TABLE mrtr_leases (name TEXT NOT NULL, key TEXT NOT NULL, until REAL NOT NULL,"
    " expires REAL NOT NULL, PRIMARY KEY (name, key)) WITHOUT ROWID",
    "CREATE INDEX mrtr_leases_until ON mrtr_leases (name, until)",
)


def sqlite_file_from_before_31(path: Path) -> Path:
    """A new SQLite file holding the tables a store made before #31, and no rows."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        for statement in SQLITE_BEFORE_31:
            db.execute(statement)
        db.commit()
    return path


@pytest.fixture(params=["memory", "sqlite", "sqlite-before", "redis", "postgresql"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """A factory of store clients that all see the same data (one dict, one file, one Redis),
    for the contract tests of every store (PostgreSQL: one schema per test; sqlite-before: a
    file whose tables a store made before #31)."""
    if request.param == "memory":
        shared = MemoryStore()
        yield lambda: shared
    elif request.param == "sqlite":
        path = tmp_path / "store.db"
        yield lambda: SQLiteStore(path)
    elif request.param == "sqlite-before":
        path = sqlite_file_from_before_31(tmp_path / "store.db")
        yield lambda: SQLiteStore(path)
    elif request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
        schema = f"t{next(_names)}_{time.time_ns()}"
        run(lambda: PostgresStore(f"{url}?schema={schema}"), _checked)  # the schema, ahead
        yield lambda: PostgresStore(f"{url}?schema={schema}")
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


async def _checked(store: Store) -> str:
    assert isinstance(store, PostgresStore)
    return await store.check()


def later(seconds: float = 60.0) -> float:
    return time.time() + seconds
