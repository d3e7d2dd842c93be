"""A server whose tool reports its process's garbage collector (test_gc.py)."""

from __future__ import annotations

import gc
import os

from mrtr.server import Server

app = Server("gc-report", version="1.0.0")


@app.tool()
async def collector() -> str:
    """This process's id, generation 0 threshold and frozen objects, space-separated."""
    return f"{os.getpid()} {gc.get_threshold()[0]} {gc.get_freeze_count()}"
