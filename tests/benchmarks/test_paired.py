"""benchmarks.paired: an older checkout and this one, served and loaded at the same moment."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.paired import main, render, summarise, target_argv
from benchmarks.run import REPO

SHARED = REPO.parent / "shared" / "bench"


def result(ops: float, p99: float, errors: int = 0) -> dict[str, Any]:
    return {"ops_per_s": ops, "op_latency_ms": {"p99": p99}, "errors": errors}


def test_31_each_run_is_a_ratio_of_two_servers_loaded_together_and_the_median_is_reported() -> None:
    summary = summarise({"mrtr2": [[result(1000, 30), result(1060, 28)],
                                   [result(900, 35), result(945, 33)],
                                   [result(1100, 29), result(1111, 29, errors=1)]]})
    row = summary["mrtr2"]
    assert [round(r, 3) for r in row["ratios"]] == [1.06, 1.05, 1.01]
    assert round(row["median"], 3) == 1.05
    assert row["errors"] == 1
    text = render(summary, "main", 32)
    assert "| mrtr2 | 1,000 (30.0) → 1,060 (28.0); " in text
    assert "| 1.060, 1.050, 1.010 | 1.050 | 1 |" in text


def test_31_a_baseline_that_answered_nothing_is_no_ratio() -> None:
    row = summarise({"call1": [[result(0, 0), result(10, 1)]]})["call1"]
    assert math.isnan(row["ratios"][0])


@pytest.mark.skipif(not (SHARED / "harness.py").is_file(),
                    reason="the shared bench harness (../shared/bench) is not here")
def test_31_a_paired_run_serves_both_checkouts_and_writes_its_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["--baseline", "HEAD", "--workloads", "call1", "--runs", "1",
                   "--duration", "0.5", "--warmup", "0.2", "--out", str(tmp_path),
                   "--harness-python", sys.executable, "--server-core", "none",
                   "--client-core", "none"])
    assert status == 0, capsys.readouterr()
    saved = json.loads((tmp_path / "paired.json").read_text())
    (base_ops, new_ops, _, _, errors), = saved["call1"]["runs"]
    assert base_ops > 0 and new_ops > 0 and errors == 0
    assert (tmp_path / "baseline" / "src" / "mrtr").is_dir()  # the exported checkout
    assert "| call1 |" in (tmp_path / "paired.md").read_text()
    logs = sorted(tmp_path.glob("*.server.log"))
    assert [log.name for log in logs] == ["baseline.server.log", "this-tree.server.log"]
    assert all("Traceback" not in log.read_text() for log in logs)


def test_31_an_unknown_baseline_is_a_clear_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    if not (SHARED / "harness.py").is_file():
        pytest.skip("the shared bench harness (../shared/bench) is not here")
    status = main(["--baseline", "no-such-ref-31", "--out", str(tmp_path),
                   "--harness-python", sys.executable])
    assert status == 2
    assert "cannot export baseline 'no-such-ref-31'" in capsys.readouterr().err


def test_31_a_shared_target_is_started_from_its_targets_json_command() -> None:
    spec = {"cmd": "{bin}/uvicorn --app-dir {bench}/servers floor_app:app --port {port}"}
    assert target_argv(spec, Path("/v/bin"), Path("/b"), 8123) == [
        "/v/bin/uvicorn", "--app-dir", "/b/servers", "floor_app:app", "--port", "8123"]


def test_31_a_table_against_a_floor_names_it() -> None:
    text = render(summarise({"call1": [[result(100, 2), result(103, 2)]]}), "main", 32,
                  "floor-uvicorn")
    assert "(`floor-uvicorn` from the shared bench)" in text
    assert "| workload | runs | this tree ÷ floor-uvicorn, each run | median | errors |" in text
    assert "| call1 | 100 (2.0) → 103 (2.0) | 1.030 | 1.030 | 0 |" in text


@pytest.mark.skipif(not (SHARED / "harness.py").is_file(),
                    reason="the shared bench harness (../shared/bench) is not here")
def test_31_against_serves_the_named_target_beside_this_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """`--against NAME` starts NAME from a targets file (here one naming `mrtr serve` itself,
    so the test needs no floor dependencies) in the baseline's place; no checkout is exported."""
    targets = tmp_path / "targets.json"
    targets.write_text(json.dumps({"other": {
        "cmd": "{bin}/python -m mrtr serve benchmarks.server:app --host 127.0.0.1 --port {port}"
               " --store none --ephemeral-key --log-level warning",
        "env": {"PYTHONPATH": str(REPO)}}}))
    out = tmp_path / "out"
    status = main(["--against", "other", "--targets", str(targets), "--workloads", "call1",
                   "--runs", "1", "--duration", "0.5", "--warmup", "0.2", "--out", str(out),
                   "--harness-python", sys.executable, "--server-core", "none",
                   "--client-core", "none"])
    assert status == 0, capsys.readouterr()
    (other_ops, ops, _, _, errors), = json.loads((out / "paired.json").read_text())["call1"]["runs"]
    assert other_ops > 0 and ops > 0 and errors == 0
    assert not (out / "baseline").exists()
    assert sorted(log.name for log in out.glob("*.server.log")) == [
        "other.server.log", "this-tree.server.log"]
    assert "this tree ÷ other" in (out / "paired.md").read_text()
    assert main(["--against", "missing", "--targets", str(targets), "--out", str(out),
                 "--harness-python", sys.executable]) == 2
    assert "no target 'missing'" in capsys.readouterr().err


def test_31_make_bench_appends_one_table_per_floor_or_why_it_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks import paired

    def fake(argv: list[str]) -> int:
        folder = Path(argv[argv.index("--out") + 1])
        if argv[argv.index("--against") + 1] == "floor-uvicorn-sqlite":
            return 1  # as a floor that did not start
        folder.mkdir(parents=True)
        (folder / "paired.md").write_text("TABLE of floor-uvicorn\n")
        return 0

    monkeypatch.setattr(paired, "main", fake)
    text = paired.beside_floors(["floor-uvicorn", "floor-uvicorn-sqlite"], "call1", 3, 8.0,
                                tmp_path, tmp_path, Path(sys.executable), ("1", "0"))
    assert text.startswith("## Side by side with the floors")
    assert "TABLE of floor-uvicorn" in text
    assert "`floor-uvicorn-sqlite`: the paired run failed (exit 1)" in text
