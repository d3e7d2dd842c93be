"""Small servers for the transport tests (served in-process, by `mrtr serve`, and over stdio)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mrtr.server import Context, Dispatcher, Form, Server

app = Server("transport-tests", version="1.0.0")


class Name(Form):
    name: str


class Color(Form):
    color: str


@app.tool()
async def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@app.tool()
async def fast() -> str:
    """Answer at once."""
    return "fast"


@app.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@app.tool()
async def count(ctx: Context, steps: int = 3, delay: float = 0.01) -> str:
    """Report `steps` progress notifications, then answer."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
        await asyncio.sleep(delay)
    return f"counted {steps}"


@app.tool()
async def hang(ctx: Context, marker: str) -> str:
    """Report progress once, then wait forever; writes `marker` when cancelled."""
    await ctx.report_progress(1, 2)
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        Path(marker).write_text("cancelled")
        raise
    return "never"


@app.tool()
async def greet(ctx: Context) -> str:
    """Elicit twice (three rounds in all), then greet."""
    name = await ctx.elicit("Your name?", Name, key="name")
    color = await ctx.elicit("Favourite colour?", Color, key="color")
    return f"Hello {name.name}, you like {color.color}"


@app.tool()
async def whoami(ctx: Context) -> str:
    """Echo the principal the transport authenticated."""
    return str(ctx.principal)


@app.tool()
async def tasks_seen() -> str:
    """How many tasks exist while this handler runs (the transport's own included)."""
    return str(len(asyncio.all_tasks()))


# A Dispatcher target with its own (ephemeral) Sealer, as `mrtr serve` users write it.
dispatcher = Dispatcher(app)
