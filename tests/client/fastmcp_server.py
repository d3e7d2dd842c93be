"""A 2025-only MCP server built with the official `mcp` 1.x package (FastMCP), for interop tests.

Run it with the interpreter of a virtualenv that has `mcp<2`:
`python fastmcp_server.py stdio` or `python fastmcp_server.py http PORT` (serves /mcp).
"""

from __future__ import annotations

import sys

from mcp.server.fastmcp import Context, FastMCP  # type: ignore[import-not-found]
from pydantic import BaseModel, Field  # type: ignore[import-not-found]

server = FastMCP("legacy-bookings")


class Seats(BaseModel):  # type: ignore[misc]
    name: str = Field(description="Who is booking")
    seats: int = Field(description="How many seats", ge=1, le=8)


@server.tool()  # type: ignore[misc]
async def book(show: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Book seats for a show, asking who and how many (a server→client elicitation)."""
    answer = await ctx.elicit(message=f"Booking for {show}", schema=Seats)
    if answer.action != "accept":
        return f"Not booked ({answer.action})."
    return f"Booked {answer.data.seats} seat(s) for {answer.data.name} at {show}."


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.settings.host = "127.0.0.1"
        server.settings.port = int(sys.argv[2])
        server.run("streamable-http")
    else:
        server.run("stdio")
