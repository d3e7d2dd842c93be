"""Pay an invoice: a confirmation, then exactly one charge, counted in the server's store.

Serve it with `mrtr serve examples.payments:app --workers 2` (each round may land on either
worker; the default SQLite store makes a replayed round return its first outcome), then call it
with `mrtr call http://127.0.0.1:8000/mcp pay invoice=INV-7 amount=40`.
"""

from __future__ import annotations

import time

from mrtr import Context, Server
from mrtr.stores import MemoryStore, Store

app = Server("payments", version="1.0.0", instructions="Pays invoices, once.")
DAY = 86_400.0
fallback = MemoryStore()  # only when served without a store (`--store none`, tests)


def till(ctx: Context) -> Store:
    """Where charges are counted: the store every worker and replica shares."""
    return ctx.store or fallback


@app.tool()
async def pay(ctx: Context, invoice: str, amount: int) -> str:
    """Pay an invoice after the user confirms the amount."""
    if not await ctx.confirm(f"Pay {amount} EUR for invoice {invoice}?", key="confirm"):
        return f"Invoice {invoice} not paid."

    async def charge() -> str:  # stands in for the payment provider's API call
        # The provider dedupes by idempotency key, atomically with the charge: if this process
        # dies after charging, the retry after the lease passes the same key and pays nothing.
        count = await till(ctx).add_once(f"charges:{invoice}", 1, expires=time.time() + DAY,
                                         token=ctx.idempotency_key("charge"))
        return f"R-{invoice}-{count}"

    await ctx.report_progress(1, 2, "Charging")  # streamed (SSE) when the call asked for it
    receipt = await ctx.once("charge", charge)
    await ctx.report_progress(2, 2, "Charged")
    return f"Paid {amount} EUR for invoice {invoice}: receipt {receipt}."


@app.tool()
async def charges(ctx: Context, invoice: str) -> int:
    """How many times an invoice was charged (operators and tests check it is never above 1)."""
    return await till(ctx).add(f"charges:{invoice}", 0, expires=time.time() + DAY)
