"""Shared fixtures: the location of ../shared (skip with a reason when it is absent)."""

from __future__ import annotations

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
