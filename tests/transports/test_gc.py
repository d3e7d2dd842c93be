"""`mrtr serve` tunes each serving process's garbage collector (serving/_gc.py, issue 31)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr.cli import main
from mrtr.serving import _serve
from mrtr.serving._gc import GC_THRESHOLD, check_threshold, tune_gc
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


@pytest.mark.parametrize("value", [-1, True, 1.5, "10"])
def test_31_a_threshold_is_a_whole_number_not_below_0(value: Any) -> None:
    with pytest.raises(ValueError, match="gc-threshold must be a whole number"):
        check_threshold(value)
    with pytest.raises(ValueError, match="gc-threshold"):
        tune_gc(value)


def test_31_threshold_0_leaves_the_collector_alone() -> None:
    import gc

    before = (gc.get_threshold(), gc.get_freeze_count())
    tune_gc(0)
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_31_tuning_freezes_the_heap_and_sets_generation_0_only() -> None:
    # In a child interpreter: a frozen heap would outlive this test in the test process.
    script = ("import gc; from mrtr.serving._gc import tune_gc; t = gc.get_threshold(); "
              "tune_gc(12345); print(gc.get_freeze_count(), *gc.get_threshold(), *t[1:])")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split()
    frozen, zero, one, two, one_before, two_before = map(int, out)
    assert frozen > 1000  # the modules, classes and functions start-up made
    assert (zero, one, two) == (12345, one_before, two_before)


def test_31_serve_hands_the_threshold_to_uvicorn_and_refuses_a_bad_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs: list[dict[str, Any]] = []
    monkeypatch.setattr(_serve, "_run_uvicorn", lambda app, **kw: runs.append(kw) or 0)
    assert _serve.serve(TARGET, port=9, keys=[b"k" * 32]) == 0
    assert main(["serve", TARGET, "--port", "9", "--ephemeral-key", "--gc-threshold", "0"]) == 0
    assert [run["gc_threshold"] for run in runs] == [GC_THRESHOLD, 0]
    with pytest.raises(ValueError, match="gc-threshold"):
        _serve.serve(TARGET, port=9, gc_threshold=-5)
    assert main(["serve", TARGET, "--port", "9", "--ephemeral-key", "--gc-threshold", "-5"]) == 2
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


def test_31_one_process_tuned_by_default_and_left_alone_with_0(tmp_path: Path) -> None:
    url, process = serve(tmp_path)
    try:
        ((threshold, frozen),) = collectors(url, 1).values()
    finally:
        stop(process)
    assert threshold == GC_THRESHOLD and frozen > 1000
    url, process = serve(tmp_path, "--gc-threshold", "0")
    try:
        ((threshold, frozen),) = collectors(url, 1).values()
    finally:
        stop(process)
    assert (threshold, frozen) == (python_default_threshold(), 0)
