"""The server of the stored-input test (#26): a task that keeps its arguments while it waits,
a round of someone else, and bearer tokens `user-NAME` naming principals.

`LIMITS_APP_MAX_ARGUMENTS` (bytes) raises StoreLimits.max_arguments, so that arguments over
the default reach the principal's byte quota instead; `LIMITS_APP_PRINCIPAL_BYTES` (bytes) sets
that quota.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from mrtr import Context, Form, Server
from mrtr.errors import Unauthorized
from mrtr.http import McpApp
from mrtr.server import Dispatcher, StoreLimits

_KNOBS = (("max_arguments", "LIMITS_APP_MAX_ARGUMENTS"),
          ("principal_bytes", "LIMITS_APP_PRINCIPAL_BYTES"))
_limits = {name: int(os.environ[variable]) for name, variable in _KNOBS if variable in os.environ}
server = Server("limits-e2e", limits=StoreLimits(**_limits))


class Name(Form):
    name: str


@server.tool(task="required")
async def keep(ctx: Context, data: str) -> str:
    """Parks on a question: until it is answered the task keeps `data` in the store."""
    answer = await ctx.elicit("Name?", Name, key="n")
    return f"{answer.name}: {len(data)}"


@server.tool()
async def greet(ctx: Context) -> str:
    answer = await ctx.elicit("Name?", Name, key="n")
    return f"Hello, {answer.name}"


async def bearer(headers: Mapping[str, str]) -> str | None:
    """`Authorization: Bearer user-NAME` is principal user-NAME; no header: anonymous."""
    token = headers.get("authorization", "").removeprefix("Bearer ")
    if not token:
        return None
    if token.startswith("user-"):
        return token
    raise Unauthorized("unknown token")


app = McpApp(Dispatcher(server), authenticator=bearer, expose_worker=True)
