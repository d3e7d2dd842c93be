"""What recording a round costs the SQLite store, per round, by write pattern and sync setting.

`python -m benchmarks.store_writes [--rounds N] [--batch B] [--outcome 600,8000] [--before]`

Rounds are recorded `batch` at a time (the calls of one event-loop turn share one commit, as
under load), each with an outcome of `--outcome` bytes (600: an `input_required` result with
its state; one table row per size), in a new file or with `--before` also in a file whose table
was made before #31 (WITHOUT ROWID, which a store keeps), the way
the ledger did before issue 31 (claim, then complete: two writes) and does now for a round that
does not act (put_if_absent: one write), under `synchronous=NORMAL` (what the store uses),
`FULL` (an fsync of the log at every commit) and `OFF`. CPU µs per round (process time, so the
store's thread counts) and wall µs (FULL waits for the disk).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from mrtr.stores import SQLiteStore

__all__ = ["main", "measure"]

SYNC = ("NORMAL", "FULL", "OFF")
PATTERNS = ("claim+complete", "put_if_absent")
# The entry table as stores made it before #31: a file made then keeps it.
BEFORE = ("CREATE TABLE mrtr_entries (key TEXT PRIMARY KEY, outcome BLOB, lease_until REAL NOT"
          " NULL, expires REAL NOT NULL, count INTEGER, holder TEXT) WITHOUT ROWID")


async def _pattern(store: SQLiteStore, pattern: str, rounds: int, batch: int,
                   size: int) -> tuple[float, float]:
    expires = time.time() + 600
    outcome = b"x" * size
    cpu, wall = time.process_time(), time.perf_counter()
    for turn in range(rounds // batch):
        keys = [f"round:{int(expires * 1000):012x}:{pattern}{turn}-{i}" for i in range(batch)]
        if pattern == "put_if_absent":
            await asyncio.gather(*(store.put_if_absent(k, outcome, expires=expires)
                                   for k in keys))
        else:
            await asyncio.gather(*(store.claim(k, lease=30, expires=expires) for k in keys))
            await asyncio.gather(*(store.complete(k, outcome, expires=expires) for k in keys))
    done = rounds // batch * batch
    return ((time.process_time() - cpu) / done * 1e6, (time.perf_counter() - wall) / done * 1e6)


async def _one(sync: str, rounds: int, batch: int, size: int,
               before: bool) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory(prefix="mrtr-store-writes-") as tmp:
        if before:
            with contextlib.closing(sqlite3.connect(Path(tmp) / "rounds.db")) as db:
                db.execute(BEFORE)
        store = SQLiteStore(Path(tmp) / "rounds.db")
        await store.claim("warm", lease=30, expires=time.time() + 600)  # opens the connection
        if sync != "NORMAL":  # the loop's own connection (a measurement, not an option)
            inline = store._inline  # noqa: SLF001
            assert inline is not None
            inline.execute(f"PRAGMA synchronous={sync}")
        try:
            return {p: await _pattern(store, p, rounds, batch, size) for p in PATTERNS}
        finally:
            await store.aclose()


def measure(rounds: int, batch: int, size: int = 600, *, before: bool = False,
            sync: Sequence[str] = SYNC) -> dict[str, dict[str, tuple[float, float]]]:
    """{sync: {pattern: (CPU µs, wall µs) per round}} with `size`-byte outcomes; `before`: in
    a file whose table was made before #31."""
    return {s: asyncio.run(_one(s, rounds, batch, size, before)) for s in sync}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.store_writes", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3600)
    p.add_argument("--batch", type=int, default=12, help="rounds per commit (default 12)")
    p.add_argument("--outcome", default="600", help="outcome sizes in bytes (default 600)")
    p.add_argument("--sync", default=",".join(SYNC), help="synchronous settings (default all)")
    p.add_argument("--before", action="store_true",
                   help="also in a file made before #31 (its WITHOUT ROWID table)")
    a = p.parse_args(argv)
    files = ("new", "before") if a.before else ("new",)
    print("| synchronous | outcome | file | " + " | ".join(f"{x} CPU / wall µs" for x in
                                                      PATTERNS) + " |")
    print("|---|---:|---|" + "---:|" * len(PATTERNS))
    for size in (int(x) for x in a.outcome.split(",")):
        for file in files:
            found = measure(a.rounds, a.batch, size, before=file == "before",
                            sync=a.sync.split(","))
            for sync, row in found.items():
                print(f"| {sync} | {size} | {file} | " + " | ".join(
                    f"{cpu:.1f} / {wall:.1f}" for cpu, wall in row.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
