"""The SQLite store's slots (admit, dismiss, admitted): a key's total kept, never summed."""

# Design: admit used to total a key's live members by reading every member row, inside the
# batch's write transaction on the event loop: 1.5 ms an admit at 10,000 members, the number of
# terminated 2025 sessions one client may keep recorded (#31; 20,000 sessions opened and ended
# by four clients took 60 s against 14 s for the first 4,000). Each key now keeps its total in a
# row of its own, equal to the sum of its lapse rows: one per member, keyed by the member's
# deadline in fixed-width hex milliseconds, so the lapsed ones are a range at the front of the
# key's part of the primary key. Every call first drops those (the work is the lapsed members'
# only), then reads the total: no call reads the other members. The rows, all in mrtr_entries,
# `count` being a weight:
#
#   "\x00s:" K NUL member                 the member: its deadline in `expires` (as before)
#   "\x00zl:" K NUL hex13(ms) NUL member  its lapse row: its deadline exactly in `lease_until`
#   "\x00zt:" K                           the total; `expires` is the latest member's deadline
#
# The generic sweep leaves the "\x00z" rows alone (a lapse row deleted without its total would
# overcount for good); `sweep_dead` drops a whole key once its total expired, when every member
# has lapsed. A key with members but no total (a file written before, or a total swept while
# lapsed members still waited for the generic sweep) is totalled once from its member rows, and
# its lapse rows are made then. A total can only be too high if something else removed rows
# (a process of an older version sharing the file sweeps or dismisses without it), and then it
# refuses too much: so a refusal first counts the key again from its members, at most every
# _RECOUNT seconds (the time of the last count is the total row's `lease_until`). Every
# function runs inside the caller's transaction.
from __future__ import annotations

import sqlite3

from mrtr.stores import _sqlite_sql as sql

__all__ = ["KEPT", "admit", "admitted", "dismiss", "sweep_dead"]

MEMBER, LAPSE, TOTAL = "\x00s:", "\x00zl:", "\x00zt:"
KEPT = ("\x00z", "\x00{")  # the key range the generic sweep leaves to sweep_dead
_DIGITS = 13  # hex digits of a deadline in ms: up to the year 144,000
_RECOUNT = 60.0  # seconds: a key's refusals count its members again at most this often
_BY_KEY = "DELETE FROM mrtr_entries WHERE key = ?"
_RANGE = "SELECT key, lease_until, expires, count FROM mrtr_entries WHERE key > ? AND key < ?"
_DROP_RANGE = "DELETE FROM mrtr_entries WHERE key > ? AND key < ?"
_DROP_LAPSED = "DELETE FROM mrtr_entries WHERE key = ? AND NOT expires > ?"
_SUBTRACT = "UPDATE mrtr_entries SET count = count - ? WHERE key = ?"
# (total key, total, a member's deadline, now): a new total was counted now.
_ADD = ("INSERT INTO mrtr_entries (key, outcome, lease_until, expires, count)"
        " VALUES (?1, NULL, ?4, ?3, ?2) ON CONFLICT (key) DO UPDATE SET count = ?2,"
        " expires = max(expires, ?3)")
_DEAD = ("SELECT key FROM mrtr_entries WHERE key > ? AND key < ? AND NOT expires > ?"
         " LIMIT ?")


def admit(db: sqlite3.Connection, now: float, key: str, member: str, *, limit: int,
          expires: float, weight: int) -> bool:
    """Store.admit's one step (see Store.admit)."""
    total, counted = _live_total(db, key, now)
    slot = _member(key, member)
    row = db.execute(sql.SELECT, (slot,)).fetchone()
    held = row[3] if row is not None and now < row[2] else None  # its weight
    if held is not None and weight <= held:  # no heavier: it keeps its slot
        if weight != held:
            _reweigh(db, key, member, row[2], weight, total - held + weight)
        return True
    if held is None and not now < expires:
        return False
    if total - (held or 0) + weight > limit:
        if not now - counted >= _RECOUNT:
            return False
        total = _recount(db, key, now)  # a refusal: make sure of the total first
        if total - (held or 0) + weight > limit:
            return False
    if held is not None:  # heavier, and it fits: same deadline, new weight
        _reweigh(db, key, member, row[2], weight, total - held + weight)
        return True
    db.execute(sql.UPSERT, (slot, None, 0.0, expires, weight))
    db.execute(sql.UPSERT, (_lapse(key, member, expires), None, expires, expires, weight))
    db.execute(_ADD, (TOTAL + key, total + weight, expires, now))
    return True


def dismiss(db: sqlite3.Connection, key: str, member: str) -> None:
    """Store.dismiss's one step: the member's rows go, and its weight leaves the total."""
    slot = _member(key, member)
    row = db.execute(sql.SELECT, (slot,)).fetchone()
    if row is None:
        return
    db.execute(_BY_KEY, (slot,))
    lapse = _lapse(key, member, row[2])
    counted = db.execute(sql.SELECT, (lapse,)).fetchone()
    if counted is not None:  # else it was never counted, or its lapse was already taken off
        db.execute(_BY_KEY, (lapse,))
        db.execute(_SUBTRACT, (counted[3], TOTAL + key))


def admitted(db: sqlite3.Connection, key: str, now: float) -> int:
    """Store.admitted's one step: the live members' total weight."""
    return _live_total(db, key, now)[0]


def sweep_dead(db: sqlite3.Connection, now: float, most: int) -> int:
    """Drop up to `most` keys whose every member lapsed (their total expired), with their lapse
    rows; how many keys went."""
    dead = [found for (found,) in db.execute(_DEAD, (TOTAL, TOTAL[:-1] + ";", now, most))]
    for total_key in dead:
        db.execute(_DROP_RANGE, _lapses(total_key[len(TOTAL):]))
        db.execute(_BY_KEY, (total_key,))
    return len(dead)


def _live_total(db: sqlite3.Connection, key: str, now: float) -> tuple[int, float]:
    """Take the lapsed members off `key`'s total: the total (made when missing) and when the
    key's members were last counted."""
    row = db.execute(sql.SELECT, (TOTAL + key,)).fetchone()
    if row is None:
        return _recount(db, key, now), now
    total: int = row[3]
    low = _lapses(key)[0]
    lapsed = [(found, weight) for found, until, _, weight in db.execute(
        _RANGE, (low, f"{low}{int(now * 1000) + 1:0{_DIGITS}x}")) if not now < until]
    for found, weight in lapsed:
        db.execute(_BY_KEY, (found,))
        db.execute(_DROP_LAPSED, (_member(key, found[len(low) + _DIGITS + 1:]), now))
        total -= weight
    if lapsed:
        db.execute(sql.REWEIGH, (total, TOTAL + key))
    return total, row[1]


def _recount(db: sqlite3.Connection, key: str, now: float) -> int:
    """Count `key`'s live member rows anew: their lapse rows and the total made again."""
    db.execute(_DROP_RANGE, _lapses(key))
    low = _member(key, "")
    total, latest = 0, 0.0
    for found, _, expires, weight in db.execute(_RANGE, (low, MEMBER + key + "\x01")).fetchall():
        if now < expires:
            member = found[len(low):]
            db.execute(sql.UPSERT, (_lapse(key, member, expires), None, expires, expires,
                                    weight))
            total, latest = total + weight, max(latest, expires)
    if latest:
        db.execute(sql.UPSERT, (TOTAL + key, None, now, latest, total))
    else:
        db.execute(_BY_KEY, (TOTAL + key,))
    return total


def _reweigh(db: sqlite3.Connection, key: str, member: str, deadline: float, weight: int,
             total: int) -> None:
    db.execute(sql.REWEIGH, (weight, _member(key, member)))
    db.execute(sql.REWEIGH, (weight, _lapse(key, member, deadline)))
    db.execute(sql.REWEIGH, (total, TOTAL + key))


def _member(key: str, member: str) -> str:
    return MEMBER + key + "\x00" + member


def _lapses(key: str) -> tuple[str, str]:
    """The bounds of `key`'s lapse rows (exclusive)."""
    return LAPSE + key + "\x00", LAPSE + key + "\x01"


def _lapse(key: str, member: str, deadline: float) -> str:
    return f"{LAPSE}{key}\x00{int(deadline * 1000):0{_DIGITS}x}\x00{member}"
