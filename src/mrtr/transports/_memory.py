"""MemoryTransport: a client transport calling a Dispatcher in this process (no socket, no pipe)."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from mrtr.client import NotificationSink, TransportError
from mrtr.protocol import RequestId, encode_message
from mrtr.server import Dispatcher, Peer, Server

__all__ = ["MemoryTransport"]


class MemoryTransport:
    """Send each request straight to `target`'s Dispatcher, as bytes, in this event loop.

    A Server gets a Dispatcher of its own (ephemeral key, no store); `principal` is the caller's
    identity its handlers see (`ctx.principal`), as an HTTP authenticator would set it.
    """

    sends_headers = False

    def __init__(self, target: Server | Dispatcher, *, principal: str | None = None) -> None:
        self.dispatcher = target if isinstance(target, Dispatcher) else Dispatcher(target)
        self.peer = Peer(principal=principal, transport="memory")

    async def request(
        self,
        message: bytes,
        *,
        request_id: RequestId,
        headers: Mapping[str, str],
        notify: NotificationSink,
    ) -> bytes:
        async def sink(notification: msgspec.Struct) -> None:
            notify(encode_message(notification))

        reply = await self.dispatcher.handle_bytes(message, self.peer, sink=sink)
        if reply is None:
            raise TransportError(f"request {request_id!r} got no reply: it was a notification")
        return reply.body

    async def aclose(self) -> None:
        """Nothing to release: the Dispatcher belongs to the caller."""
