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
    `authenticate` is given the request's method and the app's Dispatcher (DPoP, RFC 9449:
    the proof's `htm`, the store that keeps proofs single-use, the key ring for nonces).
    """

    async def authenticate(self, headers: Mapping[str, str], resource: str, /, *,
                           method: str = "POST", dispatcher: Dispatcher | None = None
                           ) -> str | None: ...

    def authorize(self, dispatcher: Dispatcher, message: Any, peer: Peer, resource: str,
                  /) -> None: ...

    def document(self, dispatcher: Dispatcher, path: str, resource: str, /) -> bytes | None: ...
