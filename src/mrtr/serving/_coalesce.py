"""Replies: the direct path's whole replies of one event-loop turn, written together.

When the client (or a proxy) runs on the same machine, every write to a connection whose peer
sleeps wakes that peer from inside the write: on a virtual machine that is an interrupt sent
to another CPU, and it is the writer that pays for it. A busy server answering many requests in
one loop turn paid that once per reply (#31: 8 % of a served process's time under `mrtr2` at
c=32, where its client slept between replies). Written together at the start of the next turn,
the first write wakes the peer and the others find it awake. While no other request is in
flight a reply is written at once: a lone request waits for no turn.
"""

# Design: one Replies per uvicorn server (its ServerState is shared by every connection). The
# bytes of one connection stay in order: whatever else is written to a transport with replies
# held for it (a stream, an error uvicorn writes while parsing, a 408, a closing connection)
# goes out after them through `now`, and the protocol calls `now` before it parses more of
# the connection, shuts it down or lets its keep-alive timer close it. A transport closed
# before the turn ends (the client went) has its held replies dropped, as uvicorn drops a
# write to a closed transport.
from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["Replies", "replies_of"]


class Replies:
    """The held replies of one event loop, by transport, until the loop's next turn."""

    __slots__ = ("_held", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._held: dict[asyncio.Transport, list[bytes]] = {}

    def later(self, transport: asyncio.Transport, data: bytes) -> None:
        """Write `data` at the start of the loop's next turn, after what is held already."""
        held = self._held
        if not held:
            self.loop.call_soon(self.flush)
        chunks = held.get(transport)
        if chunks is None:
            held[transport] = [data]
        else:
            chunks.append(data)

    def now(self, transport: asyncio.Transport, data: bytes = b"") -> None:
        """Write what is held for `transport`, then `data`, now."""
        chunks = self._held.pop(transport, None)
        if chunks:
            chunks.append(data)
            data = b"".join(chunks)
        if data:
            transport.write(data)

    def flush(self) -> None:
        held, self._held = self._held, {}
        for transport, chunks in held.items():
            if not transport.is_closing():
                transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def __len__(self) -> int:
        return len(self._held)


def replies_of(server_state: Any, loop: asyncio.AbstractEventLoop) -> Replies:
    """The Replies of the server whose state (uvicorn's ServerState) this is, on `loop`."""
    replies: Replies | None = getattr(server_state, "mrtr_replies", None)
    if replies is None or replies.loop is not loop:
        replies = Replies(loop)
        server_state.mrtr_replies = replies
    return replies
