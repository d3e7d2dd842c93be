"""Which era a server speaks: probe once with `server/discover`, else open a `Session`."""

# Design (DIGEST §7): a `DiscoverResult` means 2026-07-28; so does a recognised modern error
# (-32022 naming a version we speak: use it, never fall back; naming only versions nobody here
# speaks: raise it, as the request itself would). Anything else — another error
# code, a body that is not MCP, an HTTP 400/404/405 without a JSON-RPC body, a reply that is not
# a valid DiscoverResult, or (stdio) silence past `probe_timeout` — means `initialize`. No
# single error code decides it. The answer is kept for the Client's lifetime: one Client is one
# origin, and nothing global remembers servers.
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Literal, TypeAlias

from mrtr.errors import (
    HeaderMismatch,
    MissingRequiredClientCapability,
    ProtocolError,
    UnsupportedProtocolVersion,
    from_wire,
)
from mrtr.protocol import (
    SUPPORTED_VERSIONS,
    DiscoverRequest,
    DiscoverResult,
    JSONRPCErrorResponse,
    JSONRPCResultResponse,
    decode_server_message,
    encode_message,
)

from ._requests import request_headers
from ._session import NEGOTIABLE_VERSIONS, Session
from ._transport import Transport, TransportError

__all__ = ["PROBE_TIMEOUT", "Era", "Mode", "classify"]

Mode: TypeAlias = Literal["auto", "modern", "legacy"]
PROBE_TIMEOUT = 5.0  # seconds a stdio server may stay silent before it is taken as 2025


def classify(raw: bytes) -> DiscoverResult | str | ProtocolError | None:
    """Read a reply to `server/discover`.

    Returns the result, a version to use instead, an error to raise, or None (use `initialize`).
    """
    try:
        message = decode_server_message(raw, "server/discover")
    except ProtocolError:
        return None
    if isinstance(message, JSONRPCResultResponse) and isinstance(message.result, DiscoverResult):
        return message.result
    if not isinstance(message, JSONRPCErrorResponse):
        return None
    error = from_wire(message.error)
    if isinstance(error, UnsupportedProtocolVersion):
        ours = next((v for v in SUPPORTED_VERSIONS if v in error.supported), None)
        if ours is None and not set(error.supported) & set(NEGOTIABLE_VERSIONS):
            return error
        return ours
    if isinstance(error, HeaderMismatch | MissingRequiredClientCapability):
        return SUPPORTED_VERSIONS[0]  # only a 2026 server speaks these codes
    return None


class Era:
    """The era chosen for one Client's server: None (2026-07-28) or an open Session.

    `mode` "modern" never probes, "legacy" always initializes, "auto" probes once.
    """

    def __init__(
        self, transport: Transport, mode: Mode, *, probe_timeout: float = PROBE_TIMEOUT
    ) -> None:
        if mode not in ("auto", "modern", "legacy"):
            raise ValueError(f"mode must be 'auto', 'modern' or 'legacy', not {mode!r}")
        self.transport = transport
        self.mode = mode
        self.probe_timeout = probe_timeout
        self.session: Session | None = None
        self.probes = 0
        self._known = mode == "modern"
        self._lock = asyncio.Lock()

    async def connect(
        self,
        probe: Callable[[], DiscoverRequest],
        on_modern: Callable[[DiscoverResult | str], None],
        new_session: Callable[[], Session],
    ) -> Session | None:
        """The Session to send through, or None for 2026-07-28; decides once.

        `on_modern` receives the probe's DiscoverResult or the version to use.
        Raises what `Session.open` raises when the server answers neither way.
        """
        if self._known:
            return self.session
        async with self._lock:
            if self._known:
                return self.session
            if self.mode == "auto":
                answer = await self._probe(probe())
                if isinstance(answer, ProtocolError):
                    raise answer
                if answer is not None:
                    on_modern(answer)
                    self._known = True
                    return None
            session = new_session()
            await session.open()
            self.session, self._known = session, True
            return session

    async def close(self) -> None:
        """Stop the Session's background work, if any."""
        if self.session is not None:
            await self.session.close()

    async def _probe(
        self, request: DiscoverRequest
    ) -> DiscoverResult | str | ProtocolError | None:
        self.probes += 1
        headers = request_headers(request, {}) if self.transport.sends_headers else {}
        timeout = None if self.transport.sends_headers else self.probe_timeout
        try:
            async with asyncio.timeout(timeout):
                raw = await self.transport.request(
                    encode_message(request), request_id=request.id, headers=headers,
                    notify=_ignore,
                )
        except (TimeoutError, TransportError):
            return None
        return classify(raw)


def _ignore(message: bytes) -> None:
    return None
