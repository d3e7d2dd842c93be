"""A tiny mrtr server for the client and CLI end-to-end tests."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from mrtr.server import Context, Form, Server, ToolError

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
