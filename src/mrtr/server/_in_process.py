"""MemoryTransport: a client transport calling a Dispatcher in this process (no socket, no pipe).

The server offers it to the client through `in_process_transport()` on Server, Dispatcher and
McpApp, so `Client(app)` works while the client never imports the server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

from mrtr.errors import TransportError
from mrtr.protocol import RequestId, encode_message
from mrtr.server._dispatch import Dispatcher
from mrtr.server._peer import Peer
from mrtr.server._registry import Server

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
        notify: Callable[[bytes], None],
    ) -> bytes:
        async def sink(notification: msgspec.Struct) -> None:
            notify(encode_message(notification))

        reply = await self.dispatcher.handle_bytes(message, self.peer, sink=sink)
        if reply is None:
            raise TransportError(f"request {request_id!r} got no reply: it was a notification")
        return reply.body

    async def aclose(self) -> None:
        """Nothing to release: the Dispatcher belongs to the caller."""
