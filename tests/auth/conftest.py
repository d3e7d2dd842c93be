"""Auth test harness: one real authorization server per module, and MCP apps guarded by it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mrtr.auth import AuthSettings, ResourceServer
from mrtr.http import McpApp
from mrtr.server import Context, Dispatcher, Form, Principal, Server
from tests.auth.authserver import AuthServer
from tests.transports.conftest import call, post_args, run

RESOURCE = "http://127.0.0.1:8000/mcp"  # where asgi_client() reaches the MCP endpoint


class Name(Form):
    name: str


def secure_app() -> tuple[Server, list[str]]:
    """A server with an open tool, a scoped tool and a two-round flow; `runs` logs handler runs."""
    app = Server("secure", version="1.0.0")
    runs: list[str] = []

    @app.tool()
    async def whoami(ctx: Context) -> str:
        """The principal's parts."""
        p = ctx.identity
        assert isinstance(p, Principal) and ctx.principal == str(p)
        assert type(ctx.principal) is str  # plain: encodes anywhere (results, ctx.once)
        return f"{p.issuer} {p.subject} {p.client_id} {' '.join(sorted(p.scopes))}"

    @app.tool(scopes=["notes:write"])
    async def write(ctx: Context) -> str:
        """Needs notes:write."""
        runs.append(f"write {ctx.principal}")
        return "written"

    @app.tool()
    async def greet(ctx: Context) -> str:
        """Ask a name (two rounds)."""
        runs.append(f"greet {ctx.round} {ctx.principal}")
        name = await ctx.elicit("Your name?", Name, key="name")
        return f"Hello {name.name}"

    return app, runs


@pytest.fixture(scope="module")
def auth() -> Iterator[AuthServer]:
    with AuthServer() as server:
        yield server


def settings(auth: AuthServer, **overrides: Any) -> AuthSettings:
    values: dict[str, Any] = {"issuer": auth.issuer, "timeout": 2.0, "jwks_min_refresh": 0.0,
                              **overrides}
    return AuthSettings(**values)


def guarded(auth: AuthServer, app: Server | None = None, **overrides: Any) -> McpApp:
    server = app if app is not None else secure_app()[0]
    return McpApp(Dispatcher(server), authenticator=ResourceServer(settings(auth, **overrides)))


def send(app: McpApp, body: dict[str, Any], token: str | None = None,
         method: str = "POST", path: str = "/mcp") -> httpx.Response:
    """One request to `app` in-process (the authorization server it asks is real)."""
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as c:
            if method == "GET":
                return await c.get(path)
            args = post_args(body)
            if token is not None:
                args["headers"]["authorization"] = f"Bearer {token}"
            return await c.post(path, **args)
    return run(go())


def tool(app: McpApp, name: str, token: str | None, **params: Any) -> httpx.Response:
    return send(app, call(name, **params), token)
