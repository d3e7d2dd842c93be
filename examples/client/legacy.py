"""Call a tool on a 2025 server (initialize, pushed asks) with the same Client and handlers.

Serve the returns desk first (`mrtr serve examples.bookings:app`: it speaks both eras), then run
`python examples/client/legacy.py [URL]`.
"""

from __future__ import annotations

import asyncio
import sys

from mrtr.client import Client, Handlers, HTTPTransport
from mrtr.protocol import ElicitRequestParams, ElicitResult, ElicitValue, TextContent

ANSWERS: dict[str, ElicitValue] = {"reason": "broken", "email": "ann@example.com", "boxes": 2,
                                   "pickup_date": "2026-08-03", "confirm": True}


async def ask_user(params: ElicitRequestParams) -> ElicitResult:
    """The same handler answers MRTR input requests and a 2025 server's elicitation/create."""
    print(f"asked: {params.message}")
    if params.mode == "url" or not isinstance(params.requested_schema, dict):
        return ElicitResult(action="decline")
    fields = params.requested_schema.get("properties", {})
    if any(name not in ANSWERS for name in params.requested_schema.get("required", [])):
        return ElicitResult(action="decline")
    return ElicitResult(action="accept",
                        content={name: ANSWERS[name] for name in fields if name in ANSWERS})


async def main(url: str) -> None:
    # mode="auto" (the default) probes and falls back to initialize by itself; this server
    # speaks both eras, so "legacy" forces the 2025 handshake to show it.
    async with Client(HTTPTransport(url), handlers=Handlers(elicitation=ask_user),
                      mode="legacy", timeout=120) as client:
        result = await client.call_tool("book_return", {"order_id": "A-1001"})
        session = client.era.session  # None when the server speaks 2026-07-28
        print("session:", "none" if session is None else session.protocol_version)
        print("result:", " ".join(b.text for b in result.content if isinstance(b, TextContent)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"))
