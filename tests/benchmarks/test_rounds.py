"""benchmarks.rounds and benchmarks.store_writes run end to end; no timing assertions."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from benchmarks import rounds, store_writes


def test_31_rounds_measures_every_workload_and_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert rounds.main(["--ops", "20", "--repeat", "1", "--concurrency", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| workload | none µs/op | sqlite µs/op | memory µs/op |"
    assert [line.split("|")[1].strip() for line in out[2:]] == ["call1", "mrtr2", "mrtr3", "list"]


@pytest.mark.parametrize("workload", ["mrtr2", "mrtr3"])
def test_31_the_breakdown_names_the_parts_and_sums_to_one(workload: str) -> None:
    shares = rounds.breakdown(workload, "sqlite", 100, 4)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["store (ledger + SQLite commits)"] > 0 and shares["unseal"] > 0
    # Each part is the time of functions nested in the one it is taken from, so none is below
    # nothing whatever the machine or the process does meanwhile (while an in-process `mrtr
    # serve` left the root logger at INFO, the request lines made dispatch most of it). The
    # round engine read -16 % on mrtr3 when the route was timed by a function that only opens
    # the round.
    assert all(share >= 0 for share in shares.values()), shares
    assert rounds.breakdown("call1", "none", 20, 4)["unseal"] == 0


def test_31_memory_turn_answers_a_put_a_loop_turn_later(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def main() -> list[str]:
        store, seen = rounds._store("memory-turn", Path()), []
        assert store is not None
        loop = asyncio.get_running_loop()
        loop.call_soon(seen.append, "turn")
        claim = await store.put_if_absent("k", b"v", expires=time.time() + 60)
        seen.append(claim.status.name)
        seen.append((await store.put_if_absent("k", b"w", expires=time.time() + 60)).status.name)
        return seen

    assert asyncio.run(main()) == ["turn", "NEW", "DONE"]
    assert rounds.main(["--ops", "20", "--repeat", "1", "--concurrency", "4", "--workloads",
                        "mrtr2", "--stores", "memory,memory-turn"]) == 0
    assert "| mrtr2 |" in capsys.readouterr().out


def test_31_an_unknown_store_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        rounds.main(["--stores", "none,redis"])
    assert refused.value.code == 2 and "no store redis" in capsys.readouterr().err


def test_31_store_writes_measures_both_patterns_at_each_sync_setting() -> None:
    table = store_writes.measure(24, 12)
    assert list(table) == ["NORMAL", "FULL", "OFF"]
    assert all(list(row) == ["claim+complete", "put_if_absent"] for row in table.values())
    assert all(cpu > 0 and wall > 0 for row in table.values() for cpu, wall in row.values())


def _watchers_started(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> int:
    from mrtr.http._exchange import Exchange

    started = 0
    watch = Exchange.watch

    def counted(self: Exchange) -> None:
        nonlocal started
        started += 1
        watch(self)

    monkeypatch.setattr(Exchange, "watch", counted)
    assert rounds.main(["--ops", "20", "--repeat", "1", "--concurrency", "8", "--stores",
                        "sqlite", "--workloads", "mrtr2", *argv]) == 0
    return started


def test_31_watch_after_decides_when_requests_get_watchers_and_is_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mrtr.http._exchange import Exchange

    before = Exchange.WATCH_AFTER
    # At 0 s a request waiting on the group commit is due before its commit answers.
    assert _watchers_started(monkeypatch, ["--watch-after", "0"]) > 0
    assert _watchers_started(monkeypatch, ["--watch-after", "60"]) == 0
    assert _watchers_started(monkeypatch, ["--watch-after", "0", "--profile"]) == 0
    assert Exchange.WATCH_AFTER == before
    with pytest.raises(RuntimeError), rounds.watch_after(7.0):
        assert Exchange.WATCH_AFTER == 7.0
        raise RuntimeError
    assert Exchange.WATCH_AFTER == before


@pytest.mark.parametrize("bad", ["-1", "nan"])
def test_31_a_negative_or_nan_watch_after_is_refused(
    bad: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as refused:
        rounds.main(["--watch-after", bad])
    assert refused.value.code == 2 and "--watch-after" in capsys.readouterr().err
