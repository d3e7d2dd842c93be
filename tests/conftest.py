"""Shared fixtures: the location of ../shared (skip when absent), a private $XDG_STATE_HOME."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The read-only ../shared folder; skips the test when it is not beside the checkout."""
    if not (SHARED / "spec" / "schema-2026-07-28" / "schema.json").is_file():
        pytest.skip(f"../shared is absent ({SHARED}); spec corpus tests run in CI")
    return SHARED


@pytest.fixture(scope="session", autouse=True)
def private_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`mrtr serve` keeps a local server's key under $XDG_STATE_HOME: never the user's own."""
    state = tmp_path_factory.mktemp("xdg-state")
    saved = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(state)  # inherited by every subprocess the tests start
    yield state
    if saved is None:
        del os.environ["XDG_STATE_HOME"]
    else:
        os.environ["XDG_STATE_HOME"] = saved
