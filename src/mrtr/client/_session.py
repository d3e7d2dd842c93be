"""`Session`: a connection opened with `initialize` (MCP 2025-03-26 … 2025-11-25 servers)."""

# Design: the Client stays one code path. A Session only changes how a built request goes out
# (no modern `_meta` keys: they would make a dual-era server serve it statelessly) and adds what
# initialize-based servers need: the handshake, the `MCP-Protocol-Version` header, a re-handshake
# when HTTP says the session ended (404), and answers to the server's own requests. Those arrive
# on a request's stream or on the listen stream; each is answered once (stdio may deliver it to
# several sinks) by `fulfil` with the Client's handlers, exactly as MRTR input requests are, so
# a handler written for one era serves the other. A result has no `resultType` (absent means
# complete), so replies decode into the same public result types. A Client with a log handler
# asks for its level once, with `logging/setLevel` after the handshake (2025 servers keep it per
# session), where a 2026-07-28 request carries it in `_meta`.
from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import TypeGuard

import msgspec

from mrtr.errors import InternalError, InvalidParams, MethodNotFound, ProtocolError, from_wire
from mrtr.protocol import JSON as JSONValue
from mrtr.protocol import (
    LEGACY_VERSIONS,
    SERVER_INFO_KEY,
    UNSET,
    DiscoverRequest,
    DiscoverResult,
    Implementation,
    InitializedNotification,
    InitializeRequest,
    InitializeRequestParams,
    InitializeResult,
    InputRequest,
    JSONRPCErrorResponse,
    JSONRPCResultResponse,
    ListRootsRequest,
    LoggingLevel,
    RequestId,
    SetLevelRequest,
    SetLevelRequestParams,
    Wire,
    decode,
    encode_error,
    encode_message,
    encode_result,
)

from ._errors import ClientError, InputRefused, UnexpectedResult
from ._handlers import Handlers, fulfil
from ._requests import Request
from .transports._base import MessageSink, SessionExpired, SessionTransport, Transport

__all__ = ["NEGOTIABLE_VERSIONS", "Session", "VersionRefused"]

log = logging.getLogger("mrtr.client")
NEGOTIABLE_VERSIONS = LEGACY_VERSIONS  # newest first
VERSION_HEADER = "MCP-Protocol-Version"


class VersionRefused(ClientError):
    """The server answered `initialize` with a protocol version this client does not speak."""


class _Meta(Wire, frozen=True, kw_only=True):
    progress_token: str | int | msgspec.UnsetType = UNSET


class _Empty(Wire, frozen=True, kw_only=True):
    """`{}`: the answer to `ping`."""


class _Peek(msgspec.Struct, frozen=True):
    id: JSONValue = UNSET
    method: JSONValue = UNSET


_PEEK = msgspec.json.Decoder(_Peek)
_ENVELOPE = msgspec.json.Decoder(JSONRPCResultResponse[InitializeResult])
_INPUT_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})


class Session:
    """One initialized connection over `transport`; `open` before `request`, `close` after.

    `handlers` answer the server's requests and decide the capabilities declared;
    `log_level` is asked for with `logging/setLevel` when the server offers logging.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        handlers: Handlers,
        client_info: Implementation,
        version: str = NEGOTIABLE_VERSIONS[0],
        log_level: LoggingLevel | None = None,
    ) -> None:
        self.transport = transport
        self.handlers = handlers
        self.client_info = client_info
        self.requested_version = version
        self.log_level = log_level
        self.protocol_version: str | None = None
        self.result: InitializeResult | None = None
        self._ids = itertools.count(1)
        self._rounds = itertools.count(1)
        self._answering: set[RequestId] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._listener: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Handshake: `initialize`, check the version, `notifications/initialized`, listen.

        Raises VersionRefused, a `mrtr.errors` class for an error reply, or TransportError.
        """
        params = InitializeRequestParams(
            protocol_version=self.requested_version,
            capabilities=self.handlers.capabilities(), client_info=self.client_info,
        )
        request = InitializeRequest(id=f"initialize-{next(self._ids)}", params=params)
        raw = await self.transport.request(
            encode_message(request), request_id=request.id, headers={}, notify=self.sink(None)
        )
        result = _initialize_result(raw, request.id)
        if result.protocol_version not in NEGOTIABLE_VERSIONS:
            raise VersionRefused(
                f"the server answered initialize with protocol version "
                f"{result.protocol_version!r}; this client speaks "
                f"{', '.join(NEGOTIABLE_VERSIONS)} (and 2026-07-28 without initialize)"
            )
        self.result = result
        self.protocol_version = result.protocol_version
        note = InitializedNotification()
        await self._send(encode_message(note))
        if self.log_level is not None and result.capabilities.logging is not UNSET:
            await self._set_level(self.log_level)
        if (self._listener is None or self._listener.done()) and _has_session_io(self.transport):
            self._listener = asyncio.create_task(self._listen(self.transport))

    async def request(self, request: Request, notify: MessageSink) -> bytes:
        """Send `request` without modern `_meta`; return the raw reply.

        `server/discover` is answered here from `initialize`. A 404 ending the HTTP session
        re-opens it once and re-sends. Raises TransportError.
        """
        if isinstance(request, DiscoverRequest):
            return encode_result(request.id, self.discover_result())
        for attempt in (1, 2):
            try:
                raw = await self.transport.request(
                    _encode(request), request_id=request.id, headers=self.headers(),
                    notify=self.sink(notify),
                )
            except SessionExpired:
                if attempt == 2:
                    raise
                log.info("the server ended the session: initializing again")
                await self.open()
                continue
            return raw
        raise AssertionError("unreachable")

    async def _set_level(self, level: LoggingLevel) -> None:
        """`logging/setLevel`; a refusal is logged (the session still works, without logs)."""
        request = SetLevelRequest(id=f"set-level-{next(self._ids)}",
                                  params=SetLevelRequestParams(level=level))
        raw = await self.transport.request(
            encode_message(request), request_id=request.id, headers=self.headers(),
            notify=self.sink(None))
        try:
            error = msgspec.json.decode(raw, type=JSONRPCErrorResponse)
        except (msgspec.DecodeError, RecursionError):
            return  # a result (`{}`), or nothing we could read: nothing to do either way
        log.info("the server refused logging/setLevel %s: %s", level, error.error.message)

    async def close(self) -> None:
        """Stop listening and answering (the transport's `aclose` ends the session)."""
        tasks = [t for t in (self._listener, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._listener = None

    def headers(self) -> dict[str, str]:
        """The headers of every message after `initialize`."""
        return {VERSION_HEADER: self.protocol_version} if self.protocol_version else {}

    def discover_result(self) -> DiscoverResult:
        """What `initialize` said, in the shape `Client.discover` returns."""
        assert self.result is not None and self.protocol_version is not None
        info = msgspec.to_builtins(self.result.server_info)
        return DiscoverResult(
            supported_versions=[self.protocol_version], capabilities=self.result.capabilities,
            instructions=self.result.instructions, meta={SERVER_INFO_KEY: info},
        )

    def sink(self, inner: MessageSink | None) -> MessageSink:
        """A sink answering server requests and passing everything else to `inner`."""

        def sink(message: bytes) -> None:
            try:
                peek = _PEEK.decode(message)
            except msgspec.DecodeError:
                return
            if peek.method is UNSET or isinstance(peek.id, bool) or not isinstance(
                    peek.id, str | int):
                if inner is not None:
                    inner(message)
                return
            self._serve(peek.id, str(peek.method), message)

        return sink

    # -- server requests ---------------------------------------------------------------------

    def _serve(self, request_id: RequestId, method: str, message: bytes) -> None:
        if request_id in self._answering:
            return  # already being answered (delivered to more than one sink)
        self._answering.add(request_id)
        task = asyncio.get_running_loop().create_task(self._answer(request_id, method, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, request_id: RequestId, method: str, message: bytes) -> None:
        try:
            reply = await self._reply(request_id, method, message)
        except ProtocolError as exc:
            reply = encode_error(request_id, exc)
        except Exception:  # a handler failed: the server must not wait for an answer forever
            log.exception("the %s handler failed", method)
            reply = encode_error(request_id, InternalError("Internal error"))
        try:
            await self._send(reply)
        except Exception as exc:  # noqa: BLE001 - the server will time the request out
            log.warning("could not answer the server's %s request: %s", method, exc)
        finally:
            self._answering.discard(request_id)

    async def _reply(self, request_id: RequestId, method: str, message: bytes) -> bytes:
        if method == "ping":
            return encode_result(request_id, _Empty())
        if method not in _INPUT_METHODS:
            raise MethodNotFound(f"Method not found: {method}")
        try:
            asked: InputRequest = decode(message, InputRequest)  # type: ignore[arg-type]
        except (msgspec.DecodeError, RecursionError) as exc:
            raise InvalidParams(f"Invalid params: {exc}") from None
        key = str(request_id)
        try:
            answers = await fulfil(self.handlers, {key: asked}, next(self._rounds))
        except InputRefused as exc:
            if isinstance(asked, ListRootsRequest):
                raise MethodNotFound(str(exc)) from None
            raise InvalidParams(str(exc)) from None
        return encode_result(request_id, answers[key])

    async def _send(self, message: bytes) -> None:
        transport = self.transport
        if not _has_session_io(transport):
            raise ClientError("this transport cannot send messages outside a request")
        await transport.send(message, headers=self.headers())

    async def _listen(self, transport: SessionTransport) -> None:
        try:
            await transport.listen(self.sink(None), headers=self.headers())
        except Exception as exc:  # noqa: BLE001 - best effort: requests still carry asks
            log.debug("listen stream ended: %s", exc)


def _has_session_io(transport: Transport) -> TypeGuard[SessionTransport]:
    return callable(getattr(transport, "send", None)) and callable(
        getattr(transport, "listen", None))


def _encode(request: Request) -> bytes:
    """`request` without the modern `_meta` keys (a progress token stays)."""
    token = request.params.meta.progress_token
    meta = UNSET if token is UNSET else _Meta(progress_token=token)
    params = msgspec.structs.replace(request.params, meta=meta)
    return encode_message(msgspec.structs.replace(request, params=params))


def _initialize_result(raw: bytes, request_id: RequestId) -> InitializeResult:
    try:
        return _ENVELOPE.decode(raw).result
    except (msgspec.DecodeError, RecursionError):
        pass
    try:
        error = msgspec.json.decode(raw, type=JSONRPCErrorResponse)
    except (msgspec.DecodeError, RecursionError):
        raise UnexpectedResult("invalid reply to initialize") from None
    raise from_wire(error.error)
