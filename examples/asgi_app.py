"""Deploy a server as a plain ASGI app: shared keys from the environment, callers from a token.

Run it under any ASGI server, with the same MRTR_STATE_KEYS and MRTR_STORE in every process:

    export MRTR_STATE_KEYS=$(mrtr keys generate)
    export MRTR_STORE=sqlite:///var/lib/mrtr/accounts.db   # one store every worker opens
    uvicorn examples.asgi_app:create_app --factory --port 8000 --workers 4
    mrtr serve examples/asgi_app.py:create_app --port 8000

then `mrtr call http://127.0.0.1:8000/mcp whoami --header 'Authorization: Bearer ann-token'`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from mrtr import Context, Server
from mrtr.errors import Unauthorized
from mrtr.http import McpApp
from mrtr.server import Dispatcher, Sealer, parse_keys
from mrtr.stores import MemoryStore, store_from_env

app = Server("accounts", version="1.0.0")

# Stands in for your identity provider: a bearer token maps to a stable principal.
TOKENS = {"ann-token": "user:ann", "bob-token": "user:bob"}


@app.tool
async def whoami(ctx: Context) -> str:
    """Say who the server thinks is calling."""
    return f"You are {ctx.principal}."


@app.tool
async def close_account(ctx: Context) -> str:
    """Close the caller's account once they confirm (the flow is bound to the caller)."""
    if not await ctx.confirm(f"Close the account of {ctx.principal}?", key="sure"):
        return "Nothing closed."
    return f"Account of {ctx.principal} closed."


async def authenticate(headers: Mapping[str, str]) -> str | None:
    """The principal for a request (header names are lower-case), or 401 Unauthorized."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    principal = TOKENS.get(token) if scheme.lower() == "bearer" else None
    if principal is None:
        raise Unauthorized("a valid bearer token is required")
    return principal


def create_app() -> McpApp:
    """The ASGI app; each worker process builds its own, all sealing with the same keys and
    recording rounds in the same store (without MRTR_STORE, in this process's memory only)."""
    text = os.environ.get("MRTR_STATE_KEYS")
    if not text:
        raise SystemExit("MRTR_STATE_KEYS is not set: export MRTR_STATE_KEYS=$(mrtr keys generate)")
    sealer = Sealer(keys=parse_keys(text), audience=app.name)
    store = store_from_env(os.environ) or MemoryStore()
    return McpApp(
        Dispatcher(app, sealer=sealer, store=store),
        allowed_hosts=["localhost", "127.0.0.1", "[::1]", "mcp.example.com"],
        authenticator=authenticate,
    )
