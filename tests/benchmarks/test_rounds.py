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
