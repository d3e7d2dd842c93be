"""A tiny mrtr server for the client and CLI end-to-end tests."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from mrtr.server import Context, Form, Server

app = Server("cli-tests", version="1.0.0")


class ReturnDetails(Form):
    reason: Literal["broken", "wrong item", "other"]
    boxes: Annotated[int, Meta(ge=1, le=5)]
    note: str = ""


@app.tool()
async def book_return(ctx: Context, order_id: str) -> str:
    """Book a return pickup for an order."""
    details = await ctx.elicit(f"Return details for order {order_id}", ReturnDetails)
    if not await ctx.confirm(f"Book a pickup for {details.boxes} box(es) ({details.reason})?"):
        return "Return not booked."
    return f"Return booked: {order_id}, {details.boxes} box(es), {details.reason}."


@app.tool()
async def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)
