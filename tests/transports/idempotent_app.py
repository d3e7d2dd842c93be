"""Tools whose effects are lines in a file outside every store (`$MRTR_TEST_EFFECTS`).

`charge` books first and then waits for its provider (`seconds`), the order that makes a
retried call book twice unless the key dedupes it; `pay` asks for a confirmation first and
books in `ctx.once`. A test counts effects per invoice from the file, in any process.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mrtr import Context, Server

app = Server("idempotent", version="1.0.0")


def book(invoice: str) -> int:
    """Append one effect line for `invoice`; the number of its effects so far."""
    path = os.environ["MRTR_TEST_EFFECTS"]
    with open(path, "a", encoding="utf-8") as out:  # O_APPEND: one line per effect
        out.write(f"{invoice} {os.getpid()}\n")
    return effects(invoice)


def effects(invoice: str) -> int:
    path = Path(os.environ["MRTR_TEST_EFFECTS"])
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line.split()[0] == invoice)


@app.tool()
async def charge(invoice: str, amount: int, seconds: float = 0.0) -> str:
    """Book `amount` for `invoice`, then wait `seconds` for the provider's answer."""
    count = book(invoice)
    await asyncio.sleep(seconds)
    return f"Charged {amount} for {invoice}: receipt R-{invoice}-{count}."


@app.tool()
async def pay(ctx: Context, invoice: str, amount: int) -> str:
    """Pay after the user confirms; the booking runs once per flow."""
    if not await ctx.confirm(f"Pay {amount} for {invoice}?", key="confirm"):
        return f"{invoice} not paid."
    count = await ctx.once("book", lambda: book(invoice))
    return f"Paid {amount} for {invoice}: receipt R-{invoice}-{count}."
