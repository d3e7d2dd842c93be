"""What a 2025 session answers itself: `ping`, `logging/setLevel` and resource subscriptions.

These methods have no 2026-07-28 counterpart that the Dispatcher serves: they change or read
the state one session holds in its process.
"""

from __future__ import annotations

from collections.abc import Callable

from mrtr.errors import InvalidParams, ResourceNotFound
from mrtr.protocol import JSONObject
from mrtr.server._registry import Server
from mrtr.server.sessions._session import Session

__all__ = ["LEVELS", "Local", "local_methods"]

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
Local = Callable[[Session, JSONObject], JSONObject]


def local_methods(server: Server) -> dict[str, Local]:
    """The methods a session answers itself, by name (`resources/subscribe` checks `server`)."""

    def subscribe(session: Session, params: JSONObject) -> JSONObject:
        uri = _uri(params)
        if uri not in server.tables.resources and server.match_template(uri) is None:
            raise ResourceNotFound(data={"uri": uri})
        session.subscriptions.add(uri)
        return {}

    return {"ping": _ping, "logging/setLevel": _set_level, "resources/subscribe": subscribe,
            "resources/unsubscribe": _unsubscribe}


def _ping(session: Session, params: JSONObject) -> JSONObject:
    return {}


def _set_level(session: Session, params: JSONObject) -> JSONObject:
    level = params.get("level")
    if level not in LEVELS:
        raise InvalidParams(f"Invalid params: level must be one of {', '.join(LEVELS)}")
    session.set_level(str(level))
    return {}


def _unsubscribe(session: Session, params: JSONObject) -> JSONObject:
    session.subscriptions.discard(_uri(params))
    return {}


def _uri(params: JSONObject) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise InvalidParams("Invalid params: uri must be a string")
    return uri
