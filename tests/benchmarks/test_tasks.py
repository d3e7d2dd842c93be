"""benchmarks.tasks runs end to end; no timing assertions (numbers depend on the machine)."""

from __future__ import annotations

import pytest

from benchmarks.tasks import main


def test_tasks_bench_prints_both_stores(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--tasks", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["sqlite", "memory"]
    assert all("create" in line and "get" in line for line in lines)
