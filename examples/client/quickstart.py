"""Book a return with the Python client: list the tools, then call one that asks questions.

Serve the returns desk first (`mrtr serve examples.bookings:app`), then run
`python examples/client/quickstart.py [URL]`.
"""

from __future__ import annotations

import asyncio
import sys

from mrtr.client import Client, Handlers, HTTPTransport
from mrtr.protocol import ElicitRequestParams, ElicitResult, TextContent

# What this script can answer, by field name. A real UI would ask a person instead.
KNOWN = {"reason": "broken", "email": "ann@example.com", "boxes": 2,
         "pickup_date": "2026-08-03", "confirm": True}


async def ask_user(params: ElicitRequestParams) -> ElicitResult:
    """Fill a form from KNOWN; decline what it cannot fill (and every URL to open)."""
    print(f"asked: {params.message}")
    if params.mode == "url" or not isinstance(params.requested_schema, dict):
        return ElicitResult(action="decline")
    fields = params.requested_schema.get("properties", {})
    required = params.requested_schema.get("required", [])
    if any(name not in KNOWN for name in required):
        return ElicitResult(action="decline")  # never loop on a form we cannot answer
    return ElicitResult(action="accept",
                        content={name: KNOWN[name] for name in fields if name in KNOWN})


async def main(url: str) -> None:
    transport = HTTPTransport(url)
    async with Client(transport, handlers=Handlers(elicitation=ask_user), timeout=120) as client:
        tools = await client.list_tools()
        print("tools:", ", ".join(tool.name for tool in tools))
        result = await client.call_tool("book_return", {"order_id": "A-1001"})
        print("result:", " ".join(b.text for b in result.content if isinstance(b, TextContent)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"))
