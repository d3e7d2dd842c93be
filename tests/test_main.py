"""`python -m mrtr` is the `mrtr` command (issue 19, item 5)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mrtr", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=30)


def test_19_python_m_mrtr_prints_usage() -> None:
    out = run("--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: mrtr ")
    assert "serve" in out.stdout and "call" in out.stdout


def test_19_python_m_mrtr_serves_over_stdio() -> None:
    server = f"{sys.executable} -m mrtr serve tests.cli.app:app --stdio"
    out = run("call", "--stdio", server, "add", "a=2", "b=40")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "42"
