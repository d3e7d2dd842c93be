"""`Era`: send each request the way the server speaks — 2026-07-28, or a 2025 `Session`."""

# Design: the first request of an "auto" Client probes with `server/discover` (the
# request itself when it is one, so nothing is sent twice). A `DiscoverResult` means 2026-07-28;
# so does a recognised modern error (-32022 naming a version that is not a 2025 one, -32020,
# -32021), which the Client then handles as usual (-32022: retry with a version from
# `supported`, never fall back). Anything else — another error code, a body that is not MCP, an
# HTTP 400/404/405 without a JSON-RPC body, a reply that is not a valid DiscoverResult, or (stdio)
# silence past `probe_timeout` — means `initialize`. No single error code decides it. The answer
# is kept for the Era's lifetime: one Client is one origin, and nothing global remembers servers.
from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import Literal, TypeAlias

import msgspec

from mrtr.errors import (
    HeaderMismatch,
    MissingRequiredClientCapability,
    ProtocolError,
    UnsupportedProtocolVersion,
    from_wire,
)
from mrtr.protocol import (
    UNSET,
    DiscoverRequest,
    DiscoverResult,
    Implementation,
    JSONRPCErrorResponse,
    JSONRPCResultResponse,
    LoggingLevel,
    RequestParams,
    ServerCapabilities,
    decode_server_message,
    encode_message,
)

from ._handlers import Handlers
from ._requests import Request, request_headers
from ._session import NEGOTIABLE_VERSIONS, Session
from .transports._base import MessageSink, Transport, TransportError

__all__ = ["PROBE_TIMEOUT", "Era", "Mode", "speaks_modern"]

Mode: TypeAlias = Literal["auto", "modern", "legacy"]
PROBE_TIMEOUT = 5.0  # seconds a stdio server may stay silent before it is taken as 2025


def speaks_modern(raw: bytes) -> bool:
    """Whether a reply to `server/discover` comes from a 2026-07-28 server."""
    try:
        message = decode_server_message(raw, "server/discover")
    except ProtocolError:
        return False
    if isinstance(message, JSONRPCResultResponse):
        return isinstance(message.result, DiscoverResult)
    if not isinstance(message, JSONRPCErrorResponse):
        return False
    error = from_wire(message.error)
    if isinstance(error, UnsupportedProtocolVersion):
        return not set(error.supported) <= set(NEGOTIABLE_VERSIONS)
    return isinstance(error, HeaderMismatch | MissingRequiredClientCapability)


class Era:
    """How one Client reaches its server; `mode` "modern" never probes, "legacy" always
    initializes, "auto" probes on the first request. `session` is set for 2025 servers.
    """

    def __init__(
        self,
        transport: Transport,
        mode: Mode,
        *,
        handlers: Handlers,
        client_info: Implementation,
        probe_timeout: float = PROBE_TIMEOUT,
        log_level: LoggingLevel | None = None,
    ) -> None:
        if mode not in ("auto", "modern", "legacy"):
            raise ValueError(f"mode must be 'auto', 'modern' or 'legacy', not {mode!r}")
        self.transport = transport
        self.mode = mode
        self.handlers = handlers
        self.client_info = client_info
        self.probe_timeout = probe_timeout
        self.log_level = log_level  # a 2025 session asks for it with logging/setLevel
        self.session: Session | None = None
        # What the probe's DiscoverResult said (None: no probe, or it was answered by an error).
        self.capabilities: ServerCapabilities | None = None
        self.probes = 0
        self._known = mode == "modern"
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)

    async def request(
        self, request: Request, *, headers: Mapping[str, str], notify: MessageSink
    ) -> bytes:
        """Send `request` (built for 2026-07-28) in the server's era; return the raw reply.

        The first call decides the era (raises what `Session.open` raises when the server
        answers neither way). Raises TransportError.
        """
        if not self._known:
            async with self._lock:
                if not self._known:
                    reply = await self._choose(request, headers)
                    if reply is not None:
                        return reply
        if self.session is not None:
            return await self.session.request(request, notify)
        return await self.transport.request(
            encode_message(request), request_id=request.id, headers=headers, notify=notify
        )

    async def close(self) -> None:
        """Stop the Session's background work, if any."""
        if self.session is not None:
            await self.session.close()

    async def _choose(self, request: Request, headers: Mapping[str, str]) -> bytes | None:
        """Decide the era; the reply to `request` when the probe was `request` itself."""
        if self.mode == "auto":
            probe, probe_headers = request, headers
            if not isinstance(request, DiscoverRequest):
                meta = msgspec.structs.replace(request.params.meta, progress_token=UNSET)
                probe = DiscoverRequest(id=f"probe-{next(self._ids)}",
                                        params=RequestParams(meta=meta))
                probe_headers = request_headers(probe, {}) if headers else {}
            reply = await self._probe(probe, probe_headers)
            if reply is not None and speaks_modern(reply):
                self._known = True
                self.capabilities = _capabilities(reply)
                return reply if probe is request else None
        session = Session(self.transport, handlers=self.handlers, client_info=self.client_info,
                          log_level=self.log_level)
        await session.open()
        self.session, self._known = session, True
        return None

    async def _probe(self, request: Request, headers: Mapping[str, str]) -> bytes | None:
        self.probes += 1
        timeout = None if self.transport.sends_headers else self.probe_timeout
        try:
            async with asyncio.timeout(timeout):
                return await self.transport.request(
                    encode_message(request), request_id=request.id, headers=headers,
                    notify=_ignore,
                )
        except (TimeoutError, TransportError):
            return None


def _ignore(message: bytes) -> None:
    return None


def _capabilities(raw: bytes) -> ServerCapabilities | None:
    message = decode_server_message(raw, "server/discover")  # speaks_modern decoded it already
    if isinstance(message, JSONRPCResultResponse) and isinstance(message.result, DiscoverResult):
        return message.result.capabilities
    return None
