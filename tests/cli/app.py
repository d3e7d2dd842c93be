"""A tiny mrtr server for the client and CLI end-to-end tests."""

from __future__ import annotations

from typing import Annotated, Literal

import anyio
from msgspec import Meta

from mrtr.server import Context, Email, Form, Server, ToolError

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


class Label(Form):
    email: Annotated[str, Email]
    copies: Annotated[int, Meta(ge=1, le=5)] = 1
    speed: Literal["standard", "express"] = "express"


@app.tool()
async def print_label(ctx: Context, order_id: str) -> str:
    """Print shipping labels: a form with an email, a default count and a default choice."""
    label = await ctx.elicit(f"Label for order {order_id}", Label)
    return f"{label.copies} {label.speed} label(s) for {order_id} sent to {label.email}."


@app.tool()
async def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@app.tool()
async def fail(reason: str) -> str:
    """Always fail as a tool (an isError result)."""
    raise ToolError(f"failed: {reason}")


@app.tool()
async def ask_model(ctx: Context, question: str) -> str:
    """Ask the client's model one question and return its answer."""
    reply = await ctx.sample(question, max_tokens=50, system_prompt="Answer briefly.")
    text = getattr(reply.content, "text", "")
    return f"model {reply.model} says: {text}"


@app.tool()
async def list_roots(ctx: Context) -> str:
    """Return the client's roots, one URI per line."""
    return "\n".join(root.uri for root in await ctx.roots())


@app.tool()
async def pack(ctx: Context, boxes: int = 3, seconds: float = 0.3) -> str:
    """Pack boxes one after another, reporting progress after each (a long call)."""
    for done in range(1, boxes + 1):
        await anyio.sleep(seconds)
        await ctx.report_progress(done, boxes, f"packing box {done} of {boxes}")
    return f"Packed {boxes} boxes."


@app.tool()
async def pack_logged(ctx: Context, order_id: str) -> str:
    """Ask to confirm, then pack with a log line and progress after each box (issue 27)."""
    await ctx.info(f"packing order {order_id}", logger="warehouse")
    if not await ctx.confirm(f"Pack order {order_id}?"):
        return "Not packed."
    for done in (1, 2):
        await ctx.debug(f"box {done} taped")
        await ctx.report_progress(done, 2, f"box {done} of 2")
        await anyio.sleep(0.2)
    await ctx.warning("the carrier is late today")
    return f"Packed {order_id}."
