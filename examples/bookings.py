"""Book a return pickup: a form with validation, a confirmation, then a once-only booking.

Serve it with `mrtr serve examples.bookings:app` (or `make run`), then call it with
`mrtr call http://127.0.0.1:8000/mcp book_return order_id=A-1001`. `python examples/bookings.py`
serves it over stdio, as desktop clients launch it.
"""

from __future__ import annotations

import itertools
from datetime import date
from typing import Annotated, Literal

from msgspec import Meta

from mrtr import Context, Email, Form, Server

app = Server("brightgrid", version="1.0.0", instructions="Returns desk of BrightGrid.")


class ReturnDetails(Form):
    reason: Literal["broken", "wrong item", "other"]
    email: Annotated[str, Email]
    boxes: Annotated[int, Meta(ge=1, le=5, description="How many boxes go back")]
    pickup_date: date


class Carrier:
    """Stands in for a carrier API: every booking gets a new RMA number."""

    def __init__(self) -> None:
        self._numbers = itertools.count(1)
        self.bookings: list[tuple[str, int]] = []

    def book(self, order_id: str, boxes: int) -> str:
        self.bookings.append((order_id, boxes))
        return f"RMA-{next(self._numbers):04d}"


carrier = Carrier()


@app.tool()
async def book_return(ctx: Context, order_id: str) -> str:
    """Book a return pickup for an order."""
    details = await ctx.elicit(f"Return details for order {order_id}", ReturnDetails, key="details")
    question = f"Book a pickup on {details.pickup_date} for {details.boxes} boxes?"
    if not await ctx.confirm(question, key="confirm"):
        return "Return not booked."
    rma = await ctx.once("book", lambda: carrier.book(order_id, details.boxes))
    return f"Return {rma} booked: pickup on {details.pickup_date}, label sent to {details.email}."


@app.resource("brightgrid://policy", mime_type="text/plain")
def return_policy() -> str:
    """The returns policy."""
    return "Returns are free within 30 days. Up to 5 boxes per pickup."


if __name__ == "__main__":
    app.run()  # stdio; app.run(transport="http", port=8000) serves HTTP
