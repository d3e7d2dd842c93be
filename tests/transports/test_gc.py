"""`mrtr serve` freezes each serving process's start-up heap; `--gc-threshold` (issue 31)."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr.cli import main
from mrtr.serving import ConnectionLimits, _serve
from mrtr.serving._gc import GcTuning, check_threshold
from mrtr.serving._uvicorn import BoundedConfig
from tests.transports.conftest import call, free_port, post_args, spawn_cli, stop, wait_ready

TARGET = "tests.transports.gc_app:app"


def python_default_threshold() -> int:
    """Generation 0's threshold in a fresh interpreter (700 on CPython 3.11)."""
    out = subprocess.run([sys.executable, "-c", "import gc; print(gc.get_threshold()[0])"],
                         capture_output=True, text=True, check=True).stdout
    return int(out)


def collectors(url: str, count: int) -> dict[str, tuple[int, int]]:
    """{pid: (threshold, frozen)} as reported by the processes answering `count` calls, each on
    a connection of its own (so the workers share them out)."""
    seen: dict[str, tuple[int, int]] = {}
    for n in range(count):
        response = httpx.post(url, timeout=10,
                              **post_args(call("collector", id=n), connection="close"))
        pid, threshold, frozen = response.json()["result"]["content"][0]["text"].split()
        seen[pid] = (int(threshold), int(frozen))
    return seen


def serve(tmp_path: Path, *flags: str) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    with (tmp_path / "stderr.log").open("wb") as log:
        process = spawn_cli("serve", TARGET, "--port", str(port), "--log-level", "warning",
                            *flags, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}/mcp"
    wait_ready(url, process)
    return url, process


@pytest.mark.parametrize("value", [-1, 0, True, 1.5, "10"])
def test_31_a_threshold_is_a_whole_number_of_at_least_1(value: Any) -> None:
    with pytest.raises(ValueError, match="gc-threshold must be a whole number of at least 1"):
        check_threshold(value)
    with pytest.raises(ValueError, match="gc-threshold"):
        GcTuning(value)


def run_tuned(tuning: str) -> list[int]:
    """In a child interpreter (a frozen heap would outlive the test here): frozen objects, the
    thresholds after `tune_gc(<tuning>)`, and generations 1 and 2's before."""
    script = ("import gc; from mrtr.serving._gc import GcTuning, tune_gc; "
              f"t = gc.get_threshold(); tune_gc({tuning}); "
              "print(gc.get_freeze_count(), *gc.get_threshold(), *t[1:])")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    return [int(n) for n in out.split()]


def test_31_tuning_freezes_the_heap_and_keeps_python_s_thresholds() -> None:
    frozen, zero, one, two, one_before, two_before = run_tuned("GcTuning()")
    assert frozen > 1000  # the modules, classes and functions start-up made
    assert (zero, one, two) == (python_default_threshold(), one_before, two_before)


def test_31_a_threshold_sets_generation_0_only() -> None:
    frozen, zero, one, two, one_before, two_before = run_tuned("GcTuning(12345)")
    assert frozen > 1000
    assert (zero, one, two) == (12345, one_before, two_before)


def test_31_a_config_without_tuning_leaves_the_collector_alone() -> None:
    # What tests and embedders get: BoundedConfig tunes only when `mrtr serve` asks it to.
    before = (gc.get_threshold(), gc.get_freeze_count())
    config = BoundedConfig("tests.transports.gc_app:app", limits=ConnectionLimits())
    config.load()
    assert config.gc is None
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_31_serve_hands_the_tuning_to_uvicorn_and_refuses_a_bad_threshold(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs: list[dict[str, Any]] = []
    monkeypatch.setattr(_serve, "_run_uvicorn", lambda app, **kw: runs.append(kw) or 0)
    assert _serve.serve(TARGET, port=9, keys=[b"k" * 32]) == 0
    assert main(["serve", TARGET, "--port", "9", "--ephemeral-key", "--gc-threshold", "5000"]) == 0
    assert [run["gc_threshold"] for run in runs] == [None, 5000]
    with pytest.raises(ValueError, match="gc-threshold"):
        _serve.serve(TARGET, port=9, gc_threshold=0)
    assert main(["serve", TARGET, "--port", "9", "--ephemeral-key", "--gc-threshold", "0"]) == 2
    assert "mrtr serve: --gc-threshold must be a whole number" in capsys.readouterr().err
    assert len(runs) == 2  # nothing started for a refused setting


@pytest.mark.slow
def test_31_every_worker_of_mrtr_serve_is_tuned(tmp_path: Path) -> None:
    url, process = serve(tmp_path, "--workers", "2", "--gc-threshold", "12345")
    try:
        seen = collectors(url, 40)
    finally:
        stop(process)
    assert len(seen) == 2, seen  # both workers answered
    for threshold, frozen in seen.values():
        assert threshold == 12345 and frozen > 1000


def test_31_one_process_is_frozen_with_python_s_threshold_by_default(tmp_path: Path) -> None:
    url, process = serve(tmp_path)
    try:
        ((threshold, frozen),) = collectors(url, 1).values()
    finally:
        stop(process)
    assert threshold == python_default_threshold() and frozen > 1000
