"""Step a tool call by hand, keep a checkpoint, and finish the call with another Client.

Serve the returns desk first (`mrtr serve examples.bookings:app`), then run
`python examples/client/manual_steps.py [URL]`.
"""

from __future__ import annotations

import asyncio
import sys

from mrtr.client import Client, HTTPTransport
from mrtr.protocol import CallToolResult, ClientCapabilities, ElicitResult, TextContent

# No handlers answer in manual mode, so say what this program will answer itself: without it
# the client declares nothing and the server refuses to ask (-32021).
FORMS = ClientCapabilities(elicitation={"form": {}})
DETAILS = {"reason": "broken", "email": "ann@example.com", "boxes": 2,
           "pickup_date": "2026-08-03"}


async def main(url: str) -> None:
    async with Client(HTTPTransport(url), capabilities=FORMS) as client:
        flow = client.start_tool_call("book_return", {"order_id": "A-1001"})
        pending = await flow.step()  # sends the call; returns its first input requests
        print("round", flow.round, "asks for", ", ".join(pending))
        pending = await flow.answer({"details": ElicitResult(action="accept", content=DETAILS)})
        print("round", flow.round, "asks for", ", ".join(pending))
        checkpoint = flow.checkpoint()  # a JSON string: store it anywhere

    async with Client(HTTPTransport(url), capabilities=FORMS) as later:
        resumed = later.resume(checkpoint)
        pending = await resumed.step()  # sends nothing: fills `pending` from the checkpoint
        print("resumed at round", resumed.round, "asking for", ", ".join(pending))
        await resumed.answer({"confirm": {"action": "accept", "content": {"confirm": True}}})
        result = resumed.result
        assert isinstance(result, CallToolResult)
        print("result:", " ".join(b.text for b in result.content if isinstance(b, TextContent)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"))
