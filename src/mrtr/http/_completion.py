"""The completion route of URL elicitations: `GET|POST <path>/elicitation/complete/<id>`.

The page the user was sent to (or a third party's OAuth redirect) ends here; the sealed id is
opened and the completion recorded in the Dispatcher's store, so `ctx.elicit_url_done` on any
replica sees it on the client's next retry (server/_completions.py).
"""

# Design: the route sits behind the Host check like the endpoint (a page on a rebound DNS name
# cannot complete anything) and needs no MCP headers or bearer token: a browser arrives here.
# What authorizes it is the sealed id alone; a forged, foreign or expired one is a 400 and
# records nothing. The query parameters (bounded) are the data the handler gets back, e.g. an
# OAuth `code` it then exchanges itself.
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import msgspec

from mrtr.http._exchange import Exchange
from mrtr.server import Dispatcher
from mrtr.server._completions import COMPLETION_PREFIX, UnknownElicitation
from mrtr.server._failures import bad_request, post_only

__all__ = ["CompletionRoute"]

_MAX_QUERY = 8192  # bytes of query string kept as the completion's data
_DONE = msgspec.json.encode({"status": "complete",
                             "message": "Done. You can close this page and return to the chat."})


class CompletionRoute:
    """Answers `<path>/elicitation/complete/<id>` for the app's current Dispatcher."""

    def __init__(self, dispatcher: Callable[[], Dispatcher], path: str) -> None:
        self._dispatcher = dispatcher
        self.prefix = path.rstrip("/") + COMPLETION_PREFIX

    def matches(self, path: str) -> bool:
        return path.startswith(self.prefix)

    async def intercept(self, scope: Mapping[str, Any], exchange: Exchange) -> bool:
        """Answer the request when it is a completion (True), else leave it (False)."""
        path = scope.get("path", "")
        if not self.matches(path):
            return False
        await self.answer(path, scope.get("method", ""), scope.get("query_string", b""),
                          exchange)
        return True

    async def answer(self, path: str, method: str, query: bytes, exchange: Exchange) -> None:
        if method not in ("GET", "POST"):
            raise post_only()
        elicitation_id = path[len(self.prefix):]
        if len(query) > _MAX_QUERY:
            raise bad_request("the query string is too long")
        data = dict(parse_qsl(query.decode("latin-1"), keep_blank_values=True))
        try:
            await self._dispatcher().completions.complete(elicitation_id, data)
        except UnknownElicitation as exc:
            raise bad_request(str(exc)) from exc
        await exchange.respond(200, _DONE)
