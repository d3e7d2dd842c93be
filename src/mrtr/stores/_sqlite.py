"""SQLiteStore: one file shared by every process on one machine (`mrtr serve --workers N`)."""

# Design: stdlib sqlite3 in WAL mode (synchronous=NORMAL: a commit survives this process
# dying, not the machine losing power). Calls made during one turn of the event loop are
# group-committed: one callback runs them all in one BEGIN IMMEDIATE transaction and answers
# them only after COMMIT, so a claim is never reported before other processes see it. A
# failing statement undoes itself only (add_once's two writes share a SAVEPOINT). The batch
# first runs inline on the loop with no busy wait (tens of µs); when another process or our
# own thread holds the write lock it goes, whole, to a private thread (_worker.py) whose
# connection waits for the lock, bounded by one timer per handed batch. Slow work never runs
# inline: the loop's connection does not checkpoint (the thread does, every _CHECKPOINT inline
# commits) and expired rows are swept on the thread, _SWEEP rows at most every `sweep_every`
# seconds. A timeout or any sqlite error is StoreUnavailable. A slot is a row of its own
# ("\x00s:" key NUL member, count its weight: never a claim), and each key keeps their total
# (_sqlite_slots.py) inside the batch's BEGIN IMMEDIATE, so no other process admits between.
# Tracked leases are rows of their own table, indexed by (index, lease end): `lapsed` reads the
# due ones in order, joined to their entries. Notifications reach this process only (Channels):
# SQLite cannot wake another process, so waiters elsewhere find the state at their next look.
# Each connection's page cache is bounded at _CACHE_KIB (SQLite's default is 2000 KiB, ~2 MiB of
# RSS per connection once a store has that many pages, #31): round keys begin with their
# deadline, so writes go to the right edge of the key and expiry B-trees and replays read rows
# written moments ago; 128 pages hold those paths with room, and older pages come from the OS
# page cache. Measured: 100k and 300k stored rounds record as fast with 512 KiB as with 2000.
from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mrtr.stores import _sqlite_slots as slots
from mrtr.stores import _sqlite_sql as sql
from mrtr.stores._local import Channels, RunningLoop
from mrtr.stores._store import NEW, RUNNING, Claim, StoreUnavailable
from mrtr.stores._worker import Worker, settle

__all__ = ["SQLiteStore"]

T = TypeVar("T")
_Step = Callable[[sqlite3.Connection, float], Any]  # one call's statements, at time `now`
_Job = tuple[_Step, "asyncio.Future[Any]"]
_Outcome = tuple[Any, BaseException | None]
_SWEEP = 500
_CHECKPOINT = 256  # inline commits between two checkpoints on the thread
_CACHE_KIB = 512  # page cache per connection


class _Busy(Exception):
    """The inline batch met a held write lock: the thread runs it instead."""


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
        self._db: sqlite3.Connection | None = None  # the thread's (waits for locks)
        self._inline: sqlite3.Connection | None = None  # the loop's (never waits)
        self._pending: list[_Job] = []
        self._handed = 0  # batches on the thread: later ones queue behind them, in order
        self._commits = 0
        self._thread = Worker("mrtr-sqlite")
        self._channels = Channels()
        self._loop = RunningLoop()  # one getpid() fewer per call on Python 3.11

    # -- group commit --------------------------------------------------------------------------
    async def _call(self, step: _Step) -> Any:
        loop = self._loop.get()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((step, future))
        if len(self._pending) == 1:
            loop.call_soon(self._flush)
        try:
            return await future  # settled by the next loop turn, or bounded by _expire
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"sqlite {self.path}: {exc}") from exc

    def _flush(self) -> None:
        jobs, self._pending = self._pending, []
        if self._inline is not None and not self._handed:
            try:
                outcomes = self._batch(self._inline, jobs, inline=True)
            except _Busy:
                pass  # to the thread, which waits for the lock
            except Exception as exc:  # the commit failed: no job's write stands
                _settle(jobs, [(None, exc)] * len(jobs))
                return
            else:
                _settle(jobs, outcomes)
                self._after_commit()
                return
        self._handed += 1
        done = self._thread.submit(lambda: self._batch(self._connect(), jobs, inline=False))
        # One timer per batch the thread runs (inline ones answer in the loop turn), cancelled
        # with the answer: left to fire it would hold the batch and its outcomes `timeout` s.
        timer = self._loop.get().call_later(self._timeout, self._expire, jobs)
        done.add_done_callback(lambda outcome: self._settle_handed(jobs, outcome, timer))

    def _expire(self, jobs: list[_Job]) -> None:
        late = StoreUnavailable(f"sqlite {self.path}: no answer in {self._timeout}s")
        _settle(jobs, [(None, late)] * len(jobs))

    def _after_commit(self) -> None:
        self._commits += 1
        if self._commits % _CHECKPOINT == 0:
            self._background(sql.checkpoint)
        if not self._clock() < self._next_sweep:
            self._next_sweep = self._clock() + self._sweep_every
            self._background(self._sweep)

    def _settle_handed(self, jobs: list[_Job], done: asyncio.Future[list[_Outcome]],
                       timer: asyncio.TimerHandle) -> None:
        self._handed -= 1
        timer.cancel()
        error = None if done.cancelled() else done.exception()
        if error is not None or done.cancelled():
            failure = error or sqlite3.OperationalError("cancelled")
            _settle(jobs, [(None, failure)] * len(jobs))
        else:
            _settle(jobs, done.result())

    def _batch(self, db: sqlite3.Connection, jobs: list[_Job], *, inline: bool) -> list[_Outcome]:
        """Run every job in one transaction; each job's outcome, valid once COMMIT succeeded."""
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if inline and _locked(exc):
                raise _Busy() from exc
            raise
        outcomes: list[_Outcome] = []
        try:
            now = self._clock()
            for step, _ in jobs:
                try:  # one statement's failure undoes that statement only (add_once: SAVEPOINT)
                    outcomes.append((step(db, now), None))
                except Exception as exc:  # delivered to its caller; the batch goes on
                    outcomes.append((None, exc))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return outcomes

    def _background(self, work: Callable[[sqlite3.Connection], None]) -> None:
        """Run `work` on the thread; its failure is the next call's problem, not this one's."""
        done = self._thread.submit(lambda: work(self._connect()))
        done.add_done_callback(lambda f: f.cancelled() or f.exception())

    def _sweep(self, db: sqlite3.Connection) -> None:
        now = self._clock()
        db.execute(sql.DELETE_EXPIRED, (now, *slots.KEPT, _SWEEP))
        db.execute("BEGIN IMMEDIATE")  # a key's lapse rows and total go together
        try:
            slots.sweep_dead(db, now, _SWEEP)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    # -- connections (opened on the thread) -----------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            db = self._open(self._timeout)
            for statement in sql.SCHEMA:
                db.execute(statement)
            sql.add_holder(db)
            inline = self._open(0.0)
            inline.execute("PRAGMA wal_autocheckpoint=0")  # the thread checkpoints
            self._db, self._inline = db, inline
        return self._db

    def _open(self, busy: float) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=busy, isolation_level=None,
                             check_same_thread=False)
        try:
            self._wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
        except BaseException:
            db.close()
            raise
        return db

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
                    raise
                time.sleep(0.005)

    # -- the Store protocol --------------------------------------------------------------------
    async def claim(self, key: str, *, lease: float, expires: float, holder: str = "",
                    index: str | None = None) -> Claim:
        def step(db: sqlite3.Connection, now: float) -> Claim:
            values = {"key": key, "lease": now + lease, "expires": expires, "now": now,
                      "holder": holder}
            if db.execute(sql.CLAIM, values).rowcount > 0:
                if index is not None:
                    db.execute(sql.TRACK, (index, key, now + lease, expires))
                return NEW
            # Live when the upsert ran; a lapse since then reads as absent: report RUNNING so
            # the caller claims again rather than run unclaimed.
            return sql.live(db.execute(sql.SELECT, (key,)).fetchone(), now) or RUNNING

        claim: Claim = await self._call(step)
        return claim

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        def step(db: sqlite3.Connection, now: float) -> None:
            db.execute(sql.UPSERT, (key, bytes(outcome), 0.0, expires, None))

        await self._call(step)

    async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Claim:
        # Every recorded round waits here a loop turn or more: a Put is one object the garbage
        # collector does not track, where a closure kept five for each collection to walk (#31).
        claim: Claim = await self._call(sql.Put(key, bytes(outcome), expires))
        return claim

    async def renew(self, key: str, *, lease: float, index: str | None = None) -> bool:
        def step(db: sqlite3.Connection, now: float) -> bool:
            if db.execute(sql.RENEW, (now + lease, key, now, now)).rowcount == 0:
                return False
            if index is not None:
                db.execute("UPDATE mrtr_leases SET until = ? WHERE name = ? AND key = ?",
                           (now + lease, index, key))
            return True

        return bool(await self._call(step))

    async def release(self, key: str, *, holder: str | None = None,
                      index: str | None = None) -> None:
        def step(db: sqlite3.Connection, now: float) -> None:
            if holder is None:
                db.execute(sql.RELEASE, (key,))
            else:
                db.execute(sql.ABANDON, (key, holder))
            if index is not None:
                db.execute(sql.UNTRACK, (index, key))

        await self._call(step)

    async def lapsed(self, index: str, *, limit: int) -> list[str]:
        def step(db: sqlite3.Connection, now: float) -> list[str]:
            found: list[str] = []
            for key, tracked, outcome, lease_until, expires, count in db.execute(
                    sql.DUE, (index, now, limit)).fetchall():
                if not now < tracked or expires is None or not now < expires or (
                        outcome is not None or count is not None):
                    db.execute(sql.UNTRACK, (index, key))  # expired, or done: nothing to adopt
                elif now < lease_until:  # renewed without the index: look again then
                    db.execute("UPDATE mrtr_leases SET until = ? WHERE name = ? AND key = ?",
                               (lease_until, index, key))
                else:
                    found.append(key)
            return found

        found: list[str] = await self._call(step)
        return found

    async def purge(self, *, most: int) -> int:
        def step(db: sqlite3.Connection, now: float) -> int:
            gone = int(db.execute(sql.DELETE_EXPIRED, (now, *slots.KEPT, most)).rowcount)
            return gone + slots.sweep_dead(db, now, max(0, most - gone))

        return int(await self._call(step))

    async def notify(self, channel: str) -> None:
        self._channels.wake(channel)

    async def wait(self, channel: str, *, timeout: float) -> bool:
        return await self._channels.wait(channel, timeout)

    async def get(self, key: str) -> Claim | None:
        def step(db: sqlite3.Connection, now: float) -> Claim | None:
            return sql.live(db.execute(sql.SELECT, (key,)).fetchone(), now)

        found: Claim | None = await self._call(step)
        return found

    async def add(self, key: str, amount: int, *, expires: float) -> int:
        def step(db: sqlite3.Connection, now: float) -> int:
            count = sql.count(db.execute(sql.SELECT, (key,)).fetchone(), now) + amount
            db.execute(sql.UPSERT, (key, None, 0.0, expires, count))
            return count

        return int(await self._call(step))

    async def add_once(self, key: str, amount: int, *, token: str, expires: float) -> int:
        def step(db: sqlite3.Connection, now: float) -> int:
            count = sql.count(db.execute(sql.SELECT, (key,)).fetchone(), now)
            mark = {"key": f"{key}\x00{token}", "lease": 0.0, "expires": expires, "now": now}
            db.execute("SAVEPOINT add_once")  # two writes: they stand or fall together
            try:
                if db.execute(sql.MARK, mark).rowcount > 0:  # the token's first use: apply it
                    count += amount
                    db.execute(sql.UPSERT, (key, None, 0.0, expires, count))
            except BaseException:
                db.execute("ROLLBACK TO add_once")
                raise
            finally:
                db.execute("RELEASE add_once")
            return count

        return int(await self._call(step))

    async def admit(self, key: str, member: str, *, limit: int, expires: float,
                    weight: int = 1) -> bool:
        return bool(await self._call(lambda db, now: slots.admit(
            db, now, key, member, limit=limit, expires=expires, weight=weight)))

    async def dismiss(self, key: str, member: str) -> None:
        await self._call(lambda db, now: slots.dismiss(db, key, member))

    async def admitted(self, key: str) -> int:
        return int(await self._call(lambda db, now: slots.admitted(db, key, now)))

    async def deliver(self, key: str, message: bytes, *, expires: float) -> None:
        def step(db: sqlite3.Connection, now: float) -> None:
            db.execute(sql.UPSERT, ("\x00m:" + key, bytes(message), 0.0, expires, None))

        await self._call(step)

    async def collect(self, key: str, *, timeout: float) -> bytes | None:
        # Polled (5 ms, doubling to 50 ms): SQLite has no way to wake another process.
        def take(db: sqlite3.Connection, now: float) -> bytes | None:
            row = db.execute(sql.SELECT, ("\x00m:" + key,)).fetchone()
            if row is None or row[0] is None or not now < row[2]:
                return None
            db.execute("DELETE FROM mrtr_entries WHERE key = ?", ("\x00m:" + key,))
            return bytes(row[0])

        give_up = time.monotonic() + timeout
        delay = 0.005
        while True:
            found: bytes | None = await self._call(take)
            if found is not None or time.monotonic() >= give_up:
                return found
            await asyncio.sleep(min(delay, max(0.0, give_up - time.monotonic())))
            delay = min(delay * 2, 0.05)

    async def aclose(self) -> None:
        def close() -> None:
            for db in (self._db, self._inline):
                if db is not None:
                    db.close()
            self._db = self._inline = None

        try:
            if self._db is not None:
                await asyncio.wait_for(self._thread.submit(close), self._timeout)
        except TimeoutError as exc:
            raise StoreUnavailable(f"sqlite {self.path}: no answer in {self._timeout}s") from exc
        finally:
            self._thread.stop()


def _settle(jobs: list[_Job], outcomes: list[_Outcome]) -> None:
    settle([(future, value, error)
            for (_, future), (value, error) in zip(jobs, outcomes, strict=True)])


def _locked(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # extended codes: BUSY_RECOVERY, ...
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in str(exc)
