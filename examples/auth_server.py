"""An OAuth-protected server: bearer tokens from your authorization server, scopes per tool.

Serve it as an OAuth 2.1 resource server (tokens must be for http://127.0.0.1:8000/mcp):

    mrtr serve examples/auth_server.py:app --auth-issuer https://login.example.com \\
        --auth-scopes notes:read

or build the ASGI app in code with `create_app()` (below) and run it under any ASGI server.
"""

from __future__ import annotations

import os

from mrtr import Context, Server
from mrtr.auth import AuthSettings, ResourceServer
from mrtr.http import McpApp

app = Server("notes", version="1.0.0")
NOTES: dict[str, dict[str, str]] = {}  # subject -> title -> text


def owner(ctx: Context) -> str:
    """Whose notes these are: the token's subject at its issuer."""
    who = ctx.identity  # the token's parts; ctx.principal is the same caller as one string
    if who is not None:
        return f"{who.subject}@{who.issuer}"
    return ctx.principal or "anonymous"  # no auth (stdio, local tests)


@app.tool
async def whoami(ctx: Context) -> str:
    """Say who the token belongs to, and what it may do."""
    who = ctx.identity
    if who is None:
        return f"You are {owner(ctx)}."
    scopes = " ".join(sorted(who.scopes)) or "none"
    return f"You are {who.subject} (client {who.client_id}); scopes: {scopes}."


@app.tool
async def list_notes(ctx: Context) -> str:
    """List the caller's notes."""
    return ", ".join(sorted(NOTES.get(owner(ctx), {}))) or "No notes."


@app.tool(scopes=["notes:write"])
async def add_note(ctx: Context, title: str, text: str) -> str:
    """Add a note; needs the notes:write scope."""
    NOTES.setdefault(owner(ctx), {})[title] = text
    return f"Added {title!r}."


@app.tool(scopes=["notes:write"])
async def delete_note(ctx: Context, title: str) -> str:
    """Delete a note once the caller confirms; needs the notes:write scope."""
    mine = NOTES.get(owner(ctx), {})
    if title not in mine:
        return f"No note {title!r}."
    if not await ctx.confirm(f"Delete the note {title!r}?", key="sure"):
        return "Nothing deleted."
    del mine[title]
    return f"Deleted {title!r}."


def create_app() -> McpApp:
    """The same server as an ASGI app, configured in code (MRTR_AUTH_ISSUER names the issuer)."""
    settings = AuthSettings(
        issuer=os.environ["MRTR_AUTH_ISSUER"],
        scopes=("notes:read",),  # needed on every request
        resource=os.environ.get("MRTR_AUTH_RESOURCE"),  # the public URL, behind a proxy
    )
    return McpApp(app, authenticator=ResourceServer(settings))
