"""A destructive tool for the consent interop tests (#29): `delete_repo` confirms first.

Served by `mrtr serve tests.transports.consent_app:app` (stdio) or an McpApp in the test. Each
deletion is printed to stderr too, so a test of another process can count them.
"""

from __future__ import annotations

import sys

from mrtr import Server
from mrtr.protocol import ToolAnnotations
from mrtr.server import ConsentPolicy, Context

deleted: list[str] = []


def make(policy: ConsentPolicy | None = None) -> Server:
    """The server, with the operator's consent `policy` if any."""
    server = Server("consent-interop", consent=policy)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    async def delete_repo(ctx: Context, name: str) -> str:
        """Delete a repository and all its issues."""
        if not await ctx.confirm(f"Delete the repository {name} and all its issues?"):
            return f"Kept {name}."
        deleted.append(name)
        print(f"DELETED {name}", file=sys.stderr, flush=True)
        return f"Deleted {name}."

    return server


app = make()
