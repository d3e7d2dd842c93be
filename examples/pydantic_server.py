"""A FastMCP server moved to mrtr: its pydantic models, `Field` constraints and tools unchanged.

What differs from the FastMCP file: the import, `Server(...)` for `FastMCP(...)`, and the form,
whose answer is the model itself (FastMCP: `response_type=Pickup`, then `result.data`).
Run it with `mrtr serve examples/pydantic_server.py`, or `python examples/pydantic_server.py`.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from pydantic import BaseModel, EmailStr, Field

from mrtr import Context, Server

mcp = Server("reviews", version="1.0.0")


class Review(BaseModel):
    product: str = Field(description="The product reviewed")
    stars: int = Field(ge=1, le=5, description="From 1 (poor) to 5 (excellent)")
    summary: str


class Pickup(BaseModel):
    email: EmailStr = Field(description="Where the shipping label goes")
    boxes: int = Field(ge=1, le=5, description="How many boxes")
    day: date
    speed: Literal["standard", "express"] = "standard"


@mcp.tool()
def rate(
    product: str,
    stars: Annotated[int, Field(ge=1, le=5, description="From 1 (poor) to 5 (excellent)")],
) -> Review:
    """Rate a product."""
    return Review(product=product, stars=stars, summary="*" * stars)


@mcp.tool()
def best(
    reviews: list[Review], n: int = Field(default=1, ge=1, description="How many to keep")
) -> list[Review]:
    """The best-rated reviews first."""
    return sorted(reviews, key=lambda review: -review.stars)[:n]


@mcp.tool()
async def schedule_pickup(ctx: Context, order_id: str) -> str:
    """Book a pickup for a return: asks for the details."""
    pickup = await ctx.elicit(f"Pickup for order {order_id}", Pickup)
    return f"{pickup.boxes} box(es) on {pickup.day:%Y-%m-%d}, label to {pickup.email}"


@mcp.prompt()
def review_request(
    product: str, stars: Annotated[int, Field(ge=1, le=5, description="The rating to explain")]
) -> str:
    """Ask for a review."""
    return f"Write a {stars}-star review of {product}."


if __name__ == "__main__":
    mcp.run()
