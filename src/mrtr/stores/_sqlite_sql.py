"""The SQL statements of SQLiteStore (_sqlite.py), one table of entries, one of leases."""

# Design: see _sqlite.py; every statement is parameterised, none is built from input. The
# helpers at the end read an entry's row (outcome, lease_until, expires, count) as the Store
# protocol does, and bring an older file up to date.
# Entries live in an ordinary rowid table, its key a unique index (#31). A WITHOUT ROWID table
# keeps whole rows in its key B-tree, interior pages included, and moves a row past ~1000 bytes
# (a quarter of a page) to overflow pages: outcomes are results of hundreds of bytes to
# kilobytes, so its pages held a few rows, its tree grew deep and every split copied them
# (SQLite recommends WITHOUT ROWID for rows under ~1/20 of a page). A file made before keeps
# its WITHOUT ROWID table (CREATE TABLE IF NOT EXISTS leaves it): every statement names rows
# by key only, and ON CONFLICT (key) targets the primary key of either layout. Leases stay
# WITHOUT ROWID: their rows are small and always read by their key.
from __future__ import annotations

import contextlib
import sqlite3

import msgspec

from mrtr.stores._store import NEW, RUNNING, Claim, ClaimStatus

__all__ = [
    "ABANDON",
    "add_holder",
    "checkpoint",
    "count",
    "live",
    "CLAIM",
    "DELETE_EXPIRED",
    "DUE",
    "INSERT_NEW",
    "MARK",
    "Put",
    "RELEASE",
    "RENEW",
    "REWEIGH",
    "SCHEMA",
    "SELECT",
    "TRACK",
    "UNTRACK",
    "UPSERT",
    "WAL_FRAMES",
]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS mrtr_entries (key TEXT NOT NULL PRIMARY KEY, outcome BLOB,"
    " lease_until REAL NOT NULL, expires REAL NOT NULL, count INTEGER, holder TEXT)",
    "CREATE INDEX IF NOT EXISTS mrtr_entries_expires ON mrtr_entries (expires)",
    "CREATE TABLE IF NOT EXISTS mrtr_leases (name TEXT NOT NULL, key TEXT NOT NULL,"
    " until REAL NOT NULL, expires REAL NOT NULL, PRIMARY KEY (name, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS mrtr_leases_until ON mrtr_leases (name, until)",
)
TRACK = "INSERT OR REPLACE INTO mrtr_leases (name, key, until, expires) VALUES (?, ?, ?, ?)"
UNTRACK = "DELETE FROM mrtr_leases WHERE name = ? AND key = ?"
DUE = ("SELECT l.key, l.expires, e.outcome, e.lease_until, e.expires, e.count FROM mrtr_leases"
       " AS l LEFT JOIN mrtr_entries AS e ON e.key = l.key WHERE l.name = ? AND l.until <= ?"
       " ORDER BY l.until LIMIT ?")
SELECT = "SELECT outcome, lease_until, expires, count FROM mrtr_entries WHERE key = ?"
# Claim in one statement: insert, or take over an entry that is absent in the Store's sense
# (expired, a counter, a lapsed claim), or one this holder holds. No row changed: the entry
# is live, and only then is it read (a replay or a duplicate, not the common path).
CLAIM = ("INSERT INTO mrtr_entries (key, outcome, lease_until, expires, count, holder)"
         " VALUES (:key, NULL, :lease, :expires, NULL, :holder) ON CONFLICT (key) DO UPDATE"
         " SET outcome = NULL, lease_until = :lease, expires = :expires, count = NULL,"
         " holder = :holder WHERE NOT (expires > :now AND count IS NULL"
         " AND (outcome IS NOT NULL OR lease_until > :now))"
         " OR (:holder <> '' AND holder = :holder AND outcome IS NULL AND count IS NULL)")
# An applied token: a DONE-like row (empty outcome); an expired one is taken over.
MARK = ("INSERT INTO mrtr_entries (key, outcome, lease_until, expires, count)"
         " VALUES (:key, X'', :lease, :expires, NULL) ON CONFLICT (key) DO UPDATE SET"
         " outcome = X'', lease_until = :lease, expires = :expires, count = NULL"
         " WHERE NOT expires > :now")
UPSERT = ("INSERT OR REPLACE INTO mrtr_entries (key, outcome, lease_until, expires, count)"
           " VALUES (?, ?, ?, ?, ?)")
RENEW = ("UPDATE mrtr_entries SET lease_until = ? WHERE key = ? AND outcome IS NULL"
          " AND count IS NULL AND lease_until > ? AND expires > ?")
RELEASE = "DELETE FROM mrtr_entries WHERE key = ? AND outcome IS NULL AND count IS NULL"
ABANDON = RELEASE + " AND holder = ?"  # only the claim this holder took
# Numbered parameters (key, outcome, expires, now): a tuple binds them, not a dict per round.
INSERT_NEW = ("INSERT INTO mrtr_entries (key, outcome, lease_until, expires, count)"
               " VALUES (?1, ?2, 0.0, ?3, NULL) ON CONFLICT (key) DO UPDATE SET"
               " outcome = ?2, lease_until = 0.0, expires = ?3, count = NULL"
               " WHERE NOT (expires > ?4 AND count IS NULL"
               " AND (outcome IS NOT NULL OR lease_until > ?4))")
REWEIGH = "UPDATE mrtr_entries SET count = ? WHERE key = ?"
# (now, low, high, limit): the slots' lapse rows and totals, keys in [low, high), are left to
# _sqlite_slots.sweep_dead, which drops a key's rows together.
DELETE_EXPIRED = ("DELETE FROM mrtr_entries WHERE key IN (SELECT key FROM mrtr_entries"
                   " WHERE expires <= ? AND NOT (key >= ? AND key < ?) LIMIT ?)")


WAL_FRAMES = 4096  # log frames (pages) past which a checkpoint restarts the log: 16 MiB


class Put(msgspec.Struct, gc=False, frozen=True):
    """SQLiteStore.put_if_absent's statements, one job of a batch: (db, now) -> Claim."""

    key: str
    outcome: bytes
    expires: float

    def __call__(self, db: sqlite3.Connection, now: float) -> Claim:
        if db.execute(INSERT_NEW, (self.key, self.outcome, self.expires, now)).rowcount > 0:
            return NEW
        return live(db.execute(SELECT, (self.key,)).fetchone(), now) or RUNNING


def add_holder(db: sqlite3.Connection) -> None:
    """A file made before claims named their holder gets the column (maybe by two at once)."""
    if all(row[1] != "holder" for row in db.execute("PRAGMA table_info(mrtr_entries)")):
        with contextlib.suppress(sqlite3.OperationalError):  # another process added it
            db.execute("ALTER TABLE mrtr_entries ADD COLUMN holder TEXT")


def count(row: tuple[bytes | None, float, float, int | None] | None, now: float) -> int:
    return row[3] if row is not None and row[3] is not None and now < row[2] else 0


def live(row: tuple[bytes | None, float, float, int | None] | None, now: float) -> Claim | None:
    if row is None or not now < row[2] or row[3] is not None:
        return None  # absent, expired, or a counter
    outcome, lease_until = row[0], row[1]
    if outcome is not None:
        return Claim(ClaimStatus.DONE, bytes(outcome))
    return RUNNING if now < lease_until else None


def checkpoint(db: sqlite3.Connection) -> None:
    """Copy the log into the file on the store's thread; restart it once past WAL_FRAMES."""
    # PASSIVE copies the log without blocking the loop's writes, but the log restarts from its
    # start only when a writer finds every frame copied, which a store written during its
    # checkpoints never does: under load the log grew without bound (145 MB, its index 0.3 MiB
    # of RSS, after 16 s of `make bench` load; #31). Past WAL_FRAMES frames, RESTART copies the
    # few written meanwhile holding the write lock (the loop's batches meanwhile go to this
    # thread) so the next write starts the log over.
    frames = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    if frames > WAL_FRAMES:
        db.execute("PRAGMA wal_checkpoint(RESTART)")
