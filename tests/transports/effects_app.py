"""A payment whose effect is a line in a file outside every store (`$MRTR_TEST_EFFECTS`).

A test counts what ran from that file, whatever a store remembers or forgets: a re-run after a
lost record gives a new receipt (R-INV-2) and a second line.
"""

from __future__ import annotations

import os

from mrtr import Context, Server

app = Server("effects", version="1.0.0")


@app.tool()
async def pay(ctx: Context, invoice: str) -> str:
    """Pay an invoice after the user confirms."""
    if not await ctx.confirm(f"Pay invoice {invoice}?", key="confirm"):
        return f"Invoice {invoice} not paid."

    def charge() -> str:
        path = os.environ["MRTR_TEST_EFFECTS"]
        with open(path, "a", encoding="utf-8") as out:  # O_APPEND: one line per charge
            out.write(f"{invoice} {os.getpid()}\n")
        with open(path, encoding="utf-8") as done:
            count = sum(1 for line in done if line.split()[0] == invoice)
        return f"R-{invoice}-{count}"

    receipt = await ctx.once("charge", charge)
    return f"Paid invoice {invoice}: receipt {receipt}."
