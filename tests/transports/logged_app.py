"""A three-round tool that logs and reports progress, for the request-line tests (#27)."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from mrtr.protocol import ElicitRequestParams, ElicitResult
from mrtr.server import Context, Form, Server

app = Server("logged", version="1")


class Pickup(Form):
    boxes: Annotated[int, Meta(ge=1, le=5)]


@app.tool()
async def book(ctx: Context, order_id: str) -> str:
    """Round 1 asks for the pickup, round 2 for a confirmation, round 3 books."""
    await ctx.info(f"booking {order_id}", logger="carrier")
    pickup = await ctx.elicit(f"Pickup for {order_id}", Pickup, key="pickup")
    await ctx.report_progress(1, 2, "pickup chosen")
    if not await ctx.confirm(f"Book {pickup.boxes} box(es)?", key="sure"):
        return "Not booked."
    await ctx.report_progress(2, 2, "booked")
    await ctx.warning("the carrier is late today")
    return f"Booked {order_id}: {pickup.boxes} box(es)."


@app.tool()
async def boom() -> str:
    """A server bug."""
    return str(1 // 0)


async def answer_booking(params: ElicitRequestParams) -> ElicitResult:
    """A client's answers to `book`: 2 boxes, then yes."""
    if params.message.startswith("Book"):
        return ElicitResult(action="accept", content={"confirm": True})
    return ElicitResult(action="accept", content={"boxes": 2})
