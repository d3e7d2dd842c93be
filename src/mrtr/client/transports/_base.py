"""What the client needs from a transport: one request in, its raw response bytes out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from mrtr.errors import TransportError
from mrtr.protocol import RequestId

__all__ = [
    "InProcess",
    "MessageSink",
    "SessionExpired",
    "SessionTransport",
    "Transport",
    "TransportError",
]

InProcess = object  # a Server, Dispatcher or McpApp (anything with in_process_transport())


class SessionExpired(TransportError):
    """The server no longer knows the HTTP session (404 to a request carrying its id)."""


class MessageSink(Protocol):
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
        notify: MessageSink,
    ) -> bytes:
        """Send one encoded request; return the encoded response with the same id.

        Notifications seen meanwhile go to `notify`. Cancelling the awaiting task cancels the
        request on the wire. Raises TransportError.
        """
        ...

    async def aclose(self) -> None:
        """Release the connection or stop the server process."""
        ...


class SessionTransport(Transport, Protocol):
    """A transport that also carries messages outside a request/response pair.

    Connections that `initialize` need it: the client sends `notifications/initialized` and
    its responses to server requests with `send`, and `listen` receives server messages that
    belong to no pending request (HTTP: the GET stream; stdio: requests between our requests).
    """

    async def send(self, message: bytes, *, headers: Mapping[str, str]) -> None:
        """Send one notification or response; no reply is awaited. Raises TransportError."""
        ...

    async def listen(self, sink: MessageSink, *, headers: Mapping[str, str]) -> None:
        """Pass unsolicited server messages to `sink` until cancelled or the server refuses.

        Best effort: returns (without raising) when the server offers no such stream.
        """
        ...
