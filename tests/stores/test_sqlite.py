"""The SQLite store's table layout: rowid entries in a new file, the table kept in an older one
(the contract itself runs on both: make_store's "sqlite" and "sqlite-before")."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

from mrtr.stores import Claim, ClaimStatus, SQLiteStore
from tests.stores.conftest import later, sqlite_file_from_before_31


def _tables(path: Path) -> dict[str, str]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))


def _without_rowid(path: Path) -> bool:
    with contextlib.closing(sqlite3.connect(path)) as db:
        try:
            db.execute("SELECT rowid FROM mrtr_entries LIMIT 1").fetchall()
        except sqlite3.OperationalError:  # no such column: the table has no rowid
            return True
        return False


async def _every_operation(store: SQLiteStore) -> list[object]:
    seen: list[object] = [await store.claim("k", lease=30, expires=later(), holder="a:1",
                                            index="ix")]
    seen.append(await store.renew("k", lease=30, index="ix"))
    await store.complete("k", b"o" * 3000, expires=later())  # past a quarter of a page
    seen += [await store.get("k"), await store.put_if_absent("k", b"x", expires=later())]
    seen.append(await store.put_if_absent("p", b"p" * 600, expires=later()))
    await store.claim("held", lease=0.0, expires=later(), holder="a:1", index="ix")
    seen.append(await store.lapsed("ix", limit=10))
    await store.release("held", holder="a:1", index="ix")
    seen += [await store.add("n", 2, expires=later()),
             await store.add_once("n", 3, token="t", expires=later()),
             await store.add_once("n", 3, token="t", expires=later())]
    seen += [await store.admit("lim", "m1", limit=2, expires=later()),
             await store.admit("lim", "m2", limit=2, expires=later()),
             await store.admit("lim", "m3", limit=2, expires=later())]
    await store.dismiss("lim", "m1")
    seen.append(await store.admitted("lim"))
    await store.deliver("d", b"message", expires=later())
    seen.append(await store.collect("d", timeout=0.0))
    await store.complete("gone", b"g", expires=later(-1))
    seen.append(await store.purge(most=10))
    return seen


EXPECTED = [Claim(ClaimStatus.NEW), True, Claim(ClaimStatus.DONE, b"o" * 3000),
            Claim(ClaimStatus.DONE, b"o" * 3000), Claim(ClaimStatus.NEW), ["held"], 2, 5, 5,
            True, True, False, 1, b"message", 1]


def _run(path: Path) -> list[object]:
    async def body() -> list[object]:
        store = SQLiteStore(path)
        try:
            return await _every_operation(store)
        finally:
            await store.aclose()

    return asyncio.run(body())


def test_31_a_new_file_keeps_its_entries_in_a_rowid_table(tmp_path: Path) -> None:
    assert _run(tmp_path / "s.db") == EXPECTED
    tables = _tables(tmp_path / "s.db")
    assert "WITHOUT ROWID" not in tables["mrtr_entries"]
    assert "WITHOUT ROWID" in tables["mrtr_leases"]  # small rows, read by their key
    assert not _without_rowid(tmp_path / "s.db")
    with contextlib.closing(sqlite3.connect(tmp_path / "s.db")) as db:
        # The key is the table's primary key, as a unique index (what ON CONFLICT (key) needs).
        assert [(unique, origin) for _, _, unique, origin, _ in db.execute(
            "PRAGMA index_list(mrtr_entries)") if origin == "pk"] == [(1, "pk")]
        assert [row[3] for row in db.execute("PRAGMA table_info(mrtr_entries)")
                if row[1] == "key"] == [1]  # NOT NULL, as a WITHOUT ROWID key is


def test_31_a_file_made_before_keeps_its_without_rowid_table_and_every_operation_works(
        tmp_path: Path) -> None:
    path = sqlite_file_from_before_31(tmp_path / "s.db")
    before = _tables(path)
    assert _run(path) == EXPECTED
    assert _tables(path) == before and _without_rowid(path)


def test_31_stores_opening_a_new_file_together_make_one_rowid_table(tmp_path: Path) -> None:
    async def race(path: Path) -> list[Claim]:
        stores = [SQLiteStore(path) for _ in range(4)]
        try:
            return await asyncio.gather(*(s.claim("race", lease=30, expires=later())
                                          for s in stores))
        finally:
            for s in stores:
                await s.aclose()

    for attempt in range(10):
        path = tmp_path / f"s{attempt}.db"
        claims = asyncio.run(race(path))
        assert sorted(c.status.value for c in claims) == ["new"] + ["running"] * 3
        assert not _without_rowid(path)
