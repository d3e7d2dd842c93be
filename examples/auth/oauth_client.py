"""Call an OAuth-protected MCP server: the first run authorizes in the browser, later runs reuse
the stored token (refreshing it when it expires).

Run `python examples/auth/oauth_client.py URL`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mrtr.client import Client, HTTPTransport
from mrtr.client.auth import FileTokenStorage, LoopbackRedirect, OAuth, RedirectHandler


async def main(url: str, redirect: RedirectHandler, token_file: Path) -> list[str]:
    auth = OAuth(
        redirect=redirect,  # where the user approves, and how the code comes back
        storage=FileTokenStorage(token_file),  # written with mode 0600
    )
    async with Client(HTTPTransport(url, auth=auth)) as client:
        return [tool.name for tool in await client.list_tools()]


if __name__ == "__main__":
    server = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"
    names = asyncio.run(main(server, LoopbackRedirect(), Path.home() / ".mcp-tokens.json"))
    print("tools:", ", ".join(names))
