"""benchmarks.rounds and benchmarks.store_writes run end to end; no timing assertions."""

from __future__ import annotations

import pytest

from benchmarks import rounds, store_writes


def test_31_rounds_measures_every_workload_and_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert rounds.main(["--ops", "20", "--repeat", "1", "--concurrency", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| workload | none µs/op | sqlite µs/op | memory µs/op |"
    assert [line.split("|")[1].strip() for line in out[2:]] == ["call1", "mrtr2", "mrtr3", "list"]


def test_31_the_breakdown_names_the_parts_and_sums_to_one() -> None:
    shares = rounds.breakdown("mrtr2", "sqlite", 20, 4)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["store (ledger + SQLite commits)"] > 0 and shares["unseal"] > 0
    assert rounds.breakdown("call1", "none", 20, 4)["unseal"] == 0


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
