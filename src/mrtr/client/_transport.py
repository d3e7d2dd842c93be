"""What the client needs from a transport: one request in, its raw response bytes out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from mrtr.errors import MrtrError
from mrtr.protocol import RequestId

__all__ = ["NotificationSink", "Transport", "TransportError"]


class TransportError(MrtrError):
    """The transport failed: connection refused, server exited, non-MCP reply, broken stream."""


class NotificationSink(Protocol):
    """Receives the raw bytes of each server notification that may relate to a request."""

    def __call__(self, message: bytes, /) -> None: ...


class Transport(Protocol):
    """A client transport (HTTP, stdio, in-memory); it makes no protocol decisions.

    `sends_headers` tells the client whether the `Mcp-*` headers are used (HTTP) or ignored.
    """

    @property
    def sends_headers(self) -> bool: ...

    async def request(
        self,
        message: bytes,
        *,
        request_id: RequestId,
        headers: Mapping[str, str],
        notify: NotificationSink,
    ) -> bytes:
        """Send one encoded request; return the encoded response with the same id.

        Notifications seen meanwhile go to `notify`. Cancelling the awaiting task cancels the
        request on the wire. Raises TransportError.
        """
        ...

    async def aclose(self) -> None:
        """Release the connection or stop the server process."""
        ...
