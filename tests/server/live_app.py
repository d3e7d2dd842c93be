"""The app of the SIGKILL test in test_live_tasks.py: a 4-step task asking after step 2, each
step in `ctx.once`, every run of a step appended to $LIVE_DIR/steps.log (any process)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mrtr import Context, Form, Server
from mrtr.server import Dispatcher, Sealer, TaskPolicy, parse_keys
from mrtr.stores import store_from_url

STEPS = ["prep starters", "bake bread", "order produce", "plate desserts"]
app = Server("kitchen", tasks=TaskPolicy(poll_interval_ms=50, lease=1.5))


class Go(Form):
    ok: bool


def _ran(step: str) -> str:
    with (Path(os.environ["LIVE_DIR"]) / "steps.log").open("a") as log:
        log.write(f"{step} {os.getpid()}\n")
    return step


@app.tool(task="required")
async def menu(ctx: Context) -> str:
    for n, step in enumerate(STEPS, 1):
        if n == 3:
            assert (await ctx.elicit("Order the produce?", Go, key="go")).ok
        await ctx.once(f"step-{n}", lambda s=step: _ran(s))  # type: ignore[misc]
        await asyncio.sleep(0.5)
        await ctx.report_progress(n, len(STEPS), step)
    return "served"


dispatcher = Dispatcher(
    app, store=store_from_url(os.environ["LIVE_STORE"]) if "LIVE_STORE" in os.environ else None,
    sealer=Sealer(keys=parse_keys(os.environ["MRTR_STATE_KEYS"]), audience=app.name)
    if os.environ.get("MRTR_STATE_KEYS") else None)
