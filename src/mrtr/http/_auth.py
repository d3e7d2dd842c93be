"""What McpApp asks of an authenticator: a plain callable, or an OAuth resource server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from mrtr.server import Dispatcher, Peer

__all__ = ["Authenticator", "ProtectedResource"]

# Headers in, the caller's principal out (None: anonymous); raises Unauthorized to refuse.
Authenticator = Callable[[Mapping[str, str]], Awaitable[str | None]]


@runtime_checkable
class ProtectedResource(Protocol):
    """An authenticator that is an OAuth resource server (mrtr.auth.ResourceServer).

    `resource` is the endpoint's URL as the app derives it, never from a request header (see
    mrtr.http._hosts.bound_resource); a configured one overrides it. Each method raises
    Unauthorized (or a subclass) to refuse; `document` answers GETs on other paths.
    """

    async def authenticate(self, headers: Mapping[str, str], resource: str, /) -> str | None: ...

    def authorize(self, dispatcher: Dispatcher, message: Any, peer: Peer, resource: str,
                  /) -> None: ...

    def document(self, dispatcher: Dispatcher, path: str, resource: str, /) -> bytes | None: ...
