"""examples/payments.py with a slow charge, so a killed worker dies inside `ctx.once`'s fn.

`attempts` counts how often the charge's fn started (a crash makes it run again after the
lease); `charges` counts what the store charged (add_once with the flow's idempotency key);
`inside(pid)` how many charges worker `pid` is inside right now (charged, not yet answered).
"""

from __future__ import annotations

import asyncio
import os
import time

from mrtr import Context, Server

app = Server("payments-slow", version="1.0.0")
DAY = 86_400.0


@app.tool()
async def pay(ctx: Context, invoice: str, amount: int) -> str:
    """Pay an invoice after the user confirms; the charge takes a while."""
    if not await ctx.confirm(f"Pay {amount} EUR for invoice {invoice}?", key="confirm"):
        return f"Invoice {invoice} not paid."
    store = ctx.store
    assert store is not None, "serve with a store"

    async def charge() -> str:
        await store.add(f"attempts:{invoice}", 1, expires=time.time() + DAY)
        count = await store.add_once(f"charges:{invoice}", 1, expires=time.time() + DAY,
                                     token=ctx.idempotency_key("charge"))
        inside = f"inside:{os.getpid()}"
        await store.add(inside, 1, expires=time.time() + DAY)
        await asyncio.sleep(0.2)  # the provider is slow to answer: a kill lands in here
        await store.add(inside, -1, expires=time.time() + DAY)
        return f"R-{invoice}-{count}"

    receipt = await ctx.once("charge", charge)
    return f"Paid {amount} EUR for invoice {invoice}: receipt {receipt}."


@app.tool()
async def charges(ctx: Context, invoice: str) -> int:
    """How many times an invoice was charged."""
    assert ctx.store is not None
    return await ctx.store.add(f"charges:{invoice}", 0, expires=time.time() + DAY)


@app.tool()
async def attempts(ctx: Context, invoice: str) -> int:
    """How many times the charge's fn started for an invoice."""
    assert ctx.store is not None
    return await ctx.store.add(f"attempts:{invoice}", 0, expires=time.time() + DAY)


@app.tool()
async def inside(ctx: Context, pid: int) -> int:
    """How many charges worker `pid` is inside now (charged, the provider not yet answered)."""
    assert ctx.store is not None
    return await ctx.store.add(f"inside:{pid}", 0, expires=time.time() + DAY)
