"""The SQLite store's slots keep each key's total: an admit reads no other member (#31)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr.stores import MemoryStore, SQLiteStore, Store
from mrtr.stores import _sqlite_sql as sql


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _run(path: Path, clock: Clock, body: Callable[[SQLiteStore], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        store = SQLiteStore(path, clock=clock, sweep_every=10**9)
        try:
            return await body(store)
        finally:
            await store.aclose()

    return asyncio.run(main())


def _steps(store: SQLiteStore) -> list[int]:
    """A counter of the SQLite VM instructions both of the store's connections run."""
    count = [0]

    def step() -> int:
        count[0] += 1
        return 0

    for db in (store._inline, store._db):
        assert db is not None
        db.set_progress_handler(step, 1)
    return count


def _slot_rows(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return [key for (key,) in db.execute(
            "SELECT key FROM mrtr_entries WHERE key >= ? AND key < ? ORDER BY key",
            ("\x00s:", "\x00{"))]


def test_31_an_admit_at_5000_members_costs_what_it_costs_at_50(tmp_path: Path) -> None:
    # Before, admit summed the key's member rows inside the write transaction on the loop:
    # 1.5 ms an admit at 10,000 members, the terminated sessions one client may keep recorded.
    clock = Clock()

    async def body(store: SQLiteStore) -> list[int]:
        costs = []
        for members in (50, 5000):
            have = await store.admitted("k")
            await asyncio.gather(*(store.admit("k", f"m{n}", limit=10_000,
                                               expires=clock.now + 60 + n % 7)
                                   for n in range(have, members - 1)))
            count = _steps(store)
            for call in (store.admit("k", f"new{members}", limit=10_000, expires=clock.now + 60),
                         store.admitted("k"), store.dismiss("k", f"m{members // 2}"),
                         store.admit("k", "full", limit=members - 1, expires=clock.now + 60)):
                before = count[0]
                await call
                costs.append(count[0] - before)
        assert await store.admitted("k") == 4999  # 49 + 4,950 + 1 - 1
        return costs

    costs = _run(tmp_path / "s.db", clock, body)
    small, large = costs[:4], costs[4:]
    assert all(b <= a * 1.5 + 50 for a, b in zip(small, large, strict=True)), (small, large)


def test_31_members_a_file_recorded_before_are_counted_once_then_lapse_and_dismiss(
        tmp_path: Path) -> None:
    path, clock = tmp_path / "s.db", Clock()
    with contextlib.closing(sqlite3.connect(path)) as db:  # rows as the store wrote them before
        for statement in sql.SCHEMA:
            db.execute(statement)
        for member, deadline, weight in (("a", 10, 2), ("b", 20, 3), ("gone", -5, 4)):
            db.execute(sql.UPSERT, (f"\x00s:k\x00{member}", None, 0.0, clock.now + deadline,
                                    weight))
        db.commit()

    async def body(store: SQLiteStore) -> list[object]:
        seen: list[object] = [await store.admitted("k"),
                              await store.admit("k", "c", limit=5, expires=clock.now + 30),
                              await store.admit("k", "c", limit=7, expires=clock.now + 30)]
        clock.now += 15  # a lapses
        seen += [await store.admitted("k"), await store.admit("k", "d", limit=7,
                                                              expires=clock.now + 30)]
        await store.dismiss("k", "b")
        seen.append(await store.admitted("k"))
        return seen

    assert _run(path, clock, body) == [5, False, True, 4, True, 2]


def test_31_the_sweep_leaves_a_live_keys_total_and_drops_a_dead_key_whole(
        tmp_path: Path) -> None:
    path, clock = tmp_path / "s.db", Clock()

    async def body(store: SQLiteStore) -> list[object]:
        for n in range(6):
            await store.admit("k", f"m{n}", limit=100, expires=clock.now + 10 * (n + 1),
                              weight=n + 1)
        clock.now += 35  # m0, m1, m2 lapsed: the generic sweep takes their member rows
        purged = await store.purge(most=100)
        seen: list[object] = [purged, await store.admitted("k"),
                              await store.admit("k", "x", limit=4 + 5 + 6 + 7,
                                                expires=clock.now + 5)]
        clock.now += 100  # every member lapsed: the key goes whole
        seen += [await store.purge(most=100), _slot_rows(path), await store.admitted("k"),
                 await store.admit("k", "again", limit=1, expires=clock.now + 5),
                 await store.admitted("k")]
        return seen

    assert _run(path, clock, body) == [3, 15, True, 5, [], 0, True, 1]  # 4 members + the key


def test_31_a_total_left_too_high_by_an_older_process_is_counted_again_on_a_refusal(
        tmp_path: Path) -> None:
    # An older mrtr sharing the file dismisses a member by deleting its row only: the total
    # then refuses too much, until a refusal counts the members again (at most once a minute).
    path, clock = tmp_path / "s.db", Clock()

    async def lose() -> None:
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute("DELETE FROM mrtr_entries WHERE key = ?", ("\x00s:k\x00a",))
            db.commit()

    assert _run(path, clock, lambda s: after_a_lost_dismissal(s, clock, lose)) == HEALED


HEALED = [False, True, 2, False]


async def after_a_lost_dismissal(store: Store, clock: Clock,
                                 lose: Callable[[], Awaitable[None]]) -> list[object]:
    """Members a and b at limit 2, then `lose()` removes a's row behind the store's back:
    refused within the minute, counted again after it (HEALED)."""
    for member in ("a", "b"):
        await store.admit("k", member, limit=2, expires=clock.now + 600)
    await lose()
    seen: list[object] = [await store.admit("k", "c", limit=2, expires=clock.now + 600)]
    clock.now += 61
    return seen + [await store.admit("k", "c", limit=2, expires=clock.now + 600),
                   await store.admitted("k"),
                   await store.admit("k", "d", limit=2, expires=clock.now + 600)]


_OPS = st.lists(st.one_of(
    st.tuples(st.just("admit"), st.sampled_from(["k", "q"]), st.sampled_from("abcdef"),
              st.integers(1, 4), st.integers(0, 9), st.integers(-2, 20)),
    st.tuples(st.just("dismiss"), st.sampled_from(["k", "q"]), st.sampled_from("abcdef")),
    st.tuples(st.just("tick"), st.integers(0, 12)),
    st.tuples(st.just("purge"), st.integers(1, 20)),
    st.tuples(st.just("admitted"), st.sampled_from(["k", "q"])),
), max_size=40)


async def _replay(store: Store, clock: Clock, ops: list[tuple[Any, ...]],
                  keys: tuple[str, str] = ("k", "q")) -> list[object]:
    seen: list[object] = []
    for op in ops:
        if op[0] == "admit":
            _, key, member, weight, limit, ttl = op
            seen.append(await store.admit(key, member, limit=limit, expires=clock.now + ttl,
                                          weight=weight))
        elif op[0] == "dismiss":
            await store.dismiss(op[1], op[2])
        elif op[0] == "tick":
            clock.now += op[1]
        elif op[0] == "purge":
            await store.purge(most=op[1])
        else:
            seen.append(await store.admitted(op[1]))
    return seen + [await store.admitted(keys[0]), await store.admitted(keys[1])]


@settings(max_examples=60, deadline=None)
@given(ops=_OPS)
def test_31_slots_answer_as_the_memory_store_does(tmp_path_factory: Any,
                                                   ops: list[tuple[Any, ...]]) -> None:
    memory_clock, sqlite_clock = Clock(), Clock()
    expected = asyncio.run(_replay(MemoryStore(clock=memory_clock), memory_clock, ops))
    path = tmp_path_factory.mktemp("slots") / "s.db"
    assert _run(path, sqlite_clock, lambda s: _replay(s, sqlite_clock, ops)) == expected
