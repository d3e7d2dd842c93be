"""A server on the official `mcp` 2.x SDK (MCPServer), for `mrtr check`'s expectation tests.

Its `book` tool asks through a resolver (`Resolve` + `Elicit`): under 2026-07-28 the SDK turns
that into an InputRequiredResult with a sealed requestState. Run with a virtualenv holding
`mcp==2.3.0`: `python mcp2_server.py stdio` or `python mcp2_server.py http PORT [stateless]`.
"""

import sys
from typing import Annotated

from mcp.server.mcpserver import MCPServer  # type: ignore[import-not-found]
from mcp.server.mcpserver.resolve import Elicit, Resolve  # type: ignore[import-not-found]
from pydantic import BaseModel, Field  # type: ignore[import-not-found]

server = MCPServer("bookings-2x")


class Seats(BaseModel):  # type: ignore[misc]
    name: str = Field(description="Who is booking")
    seats: int = Field(description="How many seats", ge=1, le=8)


def ask_seats(show: str) -> Elicit[Seats]:  # type: ignore[type-arg]
    return Elicit(f"Booking for {show}", Seats)


@server.tool()  # type: ignore[misc]
async def book(show: str, seats: Annotated[Seats, Resolve(ask_seats)]) -> str:
    """Book seats for a show, asking who and how many."""
    return f"Booked {seats.seats} seat(s) for {seats.name} at {show}."


@server.tool()  # type: ignore[misc]
async def echo(text: str) -> str:
    """Echo text."""
    return text


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]),
                   stateless_http=sys.argv[3:4] == ["stateless"])
    else:
        server.run("stdio")
