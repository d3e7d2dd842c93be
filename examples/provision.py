"""Provision a server: the region is chosen from an enum; declining ends the flow cleanly."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from mrtr import Choices, Context, Elicited, Form, Server

app = Server("provisioner", version="1.0.0")

Region = Literal["eu-west", "us-east", "ap-south"]


class Placement(Form):
    region: Annotated[Region, Choices({"eu-west": "Europe (Dublin)", "us-east": "US (Virginia)",
                                       "ap-south": "Asia (Mumbai)"})]
    size: Annotated[int, Meta(ge=1, le=8, description="vCPUs")] = 2


@app.tool()
async def provision(ctx: Context, name: str) -> str:
    """Provision a virtual machine after asking where and how big."""
    answer: Elicited[Placement] = await ctx.elicit(
        f"Where should {name} run?", Placement, key="placement", outcome=True
    )
    if answer.value is None:
        return f"Provisioning of {name} stopped ({answer.action}); nothing was created."
    placement = answer.value
    return f"{name} provisioned in {placement.region} with {placement.size} vCPUs."
