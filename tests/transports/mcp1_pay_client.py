"""Pays N invoices with the official `mcp` 1.x client (run in its own virtualenv by a test).

`python mcp1_pay_client.py URL N`: one 2025 session, N `pay` calls, every confirmation accepted.
"""

import asyncio
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.types import ElicitResult


async def elicit(context, params):  # type: ignore[no-untyped-def]
    return ElicitResult(action="accept", content={"confirm": True})

async def main(url: str, n: int) -> None:
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.initialize()
            for i in range(n):
                result = await session.call_tool("pay", {"invoice": f"M-{i}", "amount": 3})
                print(result.content[0].text, flush=True)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
