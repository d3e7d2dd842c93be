"""SQLiteStore: one file shared by every process on one machine (`mrtr serve --workers N`)."""

# Design: stdlib sqlite3 in WAL mode, run on one private thread per store (sqlite3 blocks; the
# event loop must not), fed by a queue that answers waiting calls in batches (_worker.py). A
# claim is one upsert statement (its own transaction, which takes the database's write lock), so
# claims are atomic across processes; `add` is one BEGIN IMMEDIATE transaction. busy_timeout and
# asyncio.timeout bound every call; on timeout or any sqlite error the caller gets
# StoreUnavailable. Expired rows go in bounded batches (_SWEEP rows, at most once per
# `sweep_every` seconds), on the write path.
from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mrtr.stores._store import NEW, RUNNING, Claim, ClaimStatus, StoreUnavailable
from mrtr.stores._worker import Worker

__all__ = ["SQLiteStore"]

T = TypeVar("T")
_SWEEP = 500
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS mrtr_entries (key TEXT PRIMARY KEY, outcome BLOB,"
    " lease_until REAL NOT NULL, expires REAL NOT NULL, count INTEGER) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS mrtr_entries_expires ON mrtr_entries (expires)",
)
_SELECT = "SELECT outcome, lease_until, expires, count FROM mrtr_entries WHERE key = ?"
# Claim in one statement (autocommit: atomic across processes): insert, or take over an entry
# that is absent in the Store's sense (expired, a counter, a lapsed claim). No row changed: the
# entry is live, and only then is it read (a replay or a duplicate, not the common path).
_CLAIM = ("INSERT INTO mrtr_entries (key, outcome, lease_until, expires, count)"
          " VALUES (:key, NULL, :lease, :expires, NULL) ON CONFLICT (key) DO UPDATE SET"
          " outcome = NULL, lease_until = :lease, expires = :expires, count = NULL"
          " WHERE NOT (expires > :now AND count IS NULL"
          " AND (outcome IS NOT NULL OR lease_until > :now))")
# An applied token: a DONE-like row (empty outcome); an expired one is taken over.
_MARK = ("INSERT INTO mrtr_entries (key, outcome, lease_until, expires, count)"
         " VALUES (:key, X'', :lease, :expires, NULL) ON CONFLICT (key) DO UPDATE SET"
         " outcome = X'', lease_until = :lease, expires = :expires, count = NULL"
         " WHERE NOT expires > :now")
_UPSERT = ("INSERT OR REPLACE INTO mrtr_entries (key, outcome, lease_until, expires, count)"
           " VALUES (?, ?, ?, ?, ?)")


class SQLiteStore:
    """A Store in the SQLite file at `path`; safe across processes on one machine."""

    def __init__(
        self,
        path: str | Path,
        *,
        timeout: float = 5.0,
        sweep_every: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self._timeout = timeout
        self._sweep_every = sweep_every
        self._clock = clock
        self._next_sweep = 0.0
        self._db: sqlite3.Connection | None = None
        self._thread = Worker("mrtr-sqlite")

    # -- running on the store's thread ---------------------------------------------------------
    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            async with asyncio.timeout(self._timeout):  # cheaper than wait_for: no extra task
                return await self._thread.submit(lambda: self._run(fn))
        except TimeoutError as exc:
            raise StoreUnavailable(f"sqlite {self.path}: no answer in {self._timeout}s") from exc
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"sqlite {self.path}: {exc}") from exc

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._db is None:
            db = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None,
                                 check_same_thread=False)
            self._wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
            for statement in _SCHEMA:
                db.execute(statement)
            self._db = db
        return fn(self._db)

    def _wal(self, db: sqlite3.Connection) -> None:
        """Switch to WAL; processes opening a new file together may meet its lock, which
        the busy timeout does not cover for this pragma: retry until the timeout."""
        give_up = time.monotonic() + self._timeout
        while True:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError:
                if time.monotonic() > give_up:
                    db.close()
                    raise
                time.sleep(0.005)

    def _write(self, db: sqlite3.Connection, step: Callable[[sqlite3.Connection, float], T]) -> T:
        now = self._clock()
        db.execute("BEGIN IMMEDIATE")
        try:
            value = step(db, now)
            self._sweep(db, now)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return value

    def _sweep(self, db: sqlite3.Connection, now: float) -> None:
        if not now < self._next_sweep:
            self._next_sweep = now + self._sweep_every
            db.execute("DELETE FROM mrtr_entries WHERE key IN (SELECT key FROM mrtr_entries"
                       " WHERE expires <= ? LIMIT ?)", (now, _SWEEP))

    # -- the Store protocol --------------------------------------------------------------------
    async def claim(self, key: str, *, lease: float, expires: float) -> Claim:
        def run(db: sqlite3.Connection) -> Claim:
            now = self._clock()
            self._sweep(db, now)
            values = {"key": key, "lease": now + lease, "expires": expires, "now": now}
            if db.execute(_CLAIM, values).rowcount > 0:
                return NEW
            # Live when the upsert ran; a lapse since then reads as absent: report RUNNING so
            # the caller claims again rather than run unclaimed.
            return _live(db.execute(_SELECT, (key,)).fetchone(), now) or RUNNING

        return await self._call(run)

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        def run(db: sqlite3.Connection) -> None:  # one statement: atomic without BEGIN
            db.execute(_UPSERT, (key, bytes(outcome), 0.0, expires, None))
            self._sweep(db, self._clock())

        await self._call(run)

    async def renew(self, key: str, *, lease: float) -> bool:
        def run(db: sqlite3.Connection) -> bool:
            now = self._clock()
            found = db.execute(
                "UPDATE mrtr_entries SET lease_until = ? WHERE key = ? AND outcome IS NULL"
                " AND count IS NULL AND lease_until > ? AND expires > ?",
                (now + lease, key, now, now))
            return found.rowcount > 0

        return await self._call(run)

    async def release(self, key: str) -> None:
        def run(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM mrtr_entries WHERE key = ? AND outcome IS NULL"
                       " AND count IS NULL", (key,))

        await self._call(run)

    async def get(self, key: str) -> Claim | None:
        def run(db: sqlite3.Connection) -> Claim | None:
            return _live(db.execute(_SELECT, (key,)).fetchone(), self._clock())

        return await self._call(run)

    async def add(self, key: str, amount: int, *, expires: float) -> int:
        def step(db: sqlite3.Connection, now: float) -> int:
            row = db.execute(_SELECT, (key,)).fetchone()
            count = row[3] if row is not None and row[3] is not None and now < row[2] else 0
            db.execute(_UPSERT, (key, None, 0.0, expires, count + amount))
            return int(count + amount)

        return await self._call(lambda db: self._write(db, step))

    async def add_once(self, key: str, amount: int, *, token: str, expires: float) -> int:
        def step(db: sqlite3.Connection, now: float) -> int:
            row = db.execute(_SELECT, (key,)).fetchone()
            count = row[3] if row is not None and row[3] is not None and now < row[2] else 0
            mark = {"key": f"{key}\x00{token}", "lease": 0.0, "expires": expires, "now": now}
            if db.execute(_MARK, mark).rowcount > 0:  # the token's first use: apply it
                count += amount
                db.execute(_UPSERT, (key, None, 0.0, expires, count))
            return int(count)

        return await self._call(lambda db: self._write(db, step))

    async def aclose(self) -> None:
        def run(db: sqlite3.Connection) -> None:
            db.close()
            self._db = None

        if self._db is not None:
            await self._call(run)
        self._thread.stop()


def _live(row: tuple[bytes | None, float, float, int | None] | None, now: float) -> Claim | None:
    if row is None or not now < row[2] or row[3] is not None:
        return None  # absent, expired, or a counter
    outcome, lease_until = row[0], row[1]
    if outcome is not None:
        return Claim(ClaimStatus.DONE, bytes(outcome))
    return RUNNING if now < lease_until else None
