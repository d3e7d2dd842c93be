"""Book a return through `mrtr.connect`: the same code for a URL, a command line or a Server.

    python examples/client/connect.py                               the Server, in this process
    python examples/client/connect.py "python examples/bookings.py" a stdio server it starts
    python examples/client/connect.py http://127.0.0.1:8000/mcp     after `make run`
"""

from __future__ import annotations

import asyncio
import sys

import mrtr
from examples.bookings import app
from examples.client.quickstart import ask_user
from mrtr.client import Handlers
from mrtr.protocol import TextContent


async def main(target: object) -> None:
    async with mrtr.connect(target, handlers=Handlers(elicitation=ask_user)) as client:
        result = await client.call_tool("book_return", {"order_id": "A-1001"})
        print("result:", " ".join(b.text for b in result.content if isinstance(b, TextContent)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else app))
