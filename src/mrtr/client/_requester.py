"""`Requester`: one request built complete (fresh id, `_meta`, headers), sent and decoded."""

# Design: `Client` and `client.tasks` share this object instead of reaching into each other.
# It owns what every request needs — the id and progress-token counters, the tool index that
# gives `Mcp-*` headers, the TTL cache — and the two recoveries the spec suggests: -32022 →
# retry once with a version from `supported`, -32020 on tools/call → re-list tools and retry
# once. The settings a caller may change on a Client (`capabilities`, `timeout`, …) are read
# from it at each request through `Settings`, never copied. Idempotency keys (docs/client.md):
# what the server declares is learned from the DiscoverResults that pass anyway (the era probe,
# `discover()`, `initialize` in a 2025 session), never from a request sent just to find out; a
# keyed tools/call to a server that declared `tools.idempotency` is resent with the same key
# after `idempotency_key_in_progress` or `outcome_pending` (waiting retryAfter) and after a
# transport failure: the server runs it once whatever the client resends.
from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

import msgspec

from mrtr.errors import (
    HeaderMismatch,
    IdempotencyKeyInProgress,
    OutcomePending,
    ProtocolError,
    TransportError,
    UnsupportedProtocolVersion,
    from_wire,
)
from mrtr.protocol import (
    SUPPORTED_VERSIONS,
    TASKS_EXTENSION,
    UNSET,
    CallToolRequest,
    ClientCapabilities,
    CreateTaskResult,
    DiscoverResult,
    Implementation,
    JSONRPCErrorResponse,
    JSONRPCResultResponse,
    LoggingLevel,
    ProgressToken,
    RequestMeta,
    ServerCapabilities,
    Tool,
    UnsetType,
    idempotency_declared,
    valid_idempotency_key,
)

from ._cache import TTLCache
from ._deadline import bounded
from ._era import Era
from ._errors import UnexpectedResult
from ._handlers import Handlers
from ._limits import ClientLimits
from ._requests import (
    LogHandler,
    LogRoute,
    ProgressHandler,
    Request,
    decode_reply,
    notification_sink,
    request_headers,
)
from ._steps import FlowRequest, TaskRequest
from ._tools import ToolIndex
from .transports._base import Transport

__all__ = ["Requester", "Settings", "with_tasks"]

ResultT = TypeVar("ResultT")


class Settings(Protocol):
    """The public Client attributes a request is built from, read at every request."""

    transport: Transport
    handlers: Handlers
    capabilities: ClientCapabilities | None
    client_info: Implementation
    protocol_version: str
    declare_tasks: bool
    timeout: float | None
    era: Era
    limits: ClientLimits
    on_log: LogHandler | None
    log_level: LoggingLevel

    async def list_tools(self, *, refresh: bool = False) -> list[Tool]: ...

    async def discover(self) -> DiscoverResult: ...


def with_tasks(capabilities: ClientCapabilities) -> ClientCapabilities:
    """`capabilities` declaring the tasks extension too."""
    extensions = dict(capabilities.extensions or {})
    extensions.setdefault(TASKS_EXTENSION, {})
    return msgspec.structs.replace(capabilities, extensions=extensions)


class Requester:
    """Builds, sends and decodes the requests of one Client (`settings`)."""

    def __init__(self, settings: Settings, clock: Callable[[], float]) -> None:
        self.settings = settings
        self.cache = TTLCache(clock)
        self.tools = ToolIndex(check_headers=settings.transport.sends_headers)
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self._server: ServerCapabilities | None = None  # from the last DiscoverResult seen
        self._logs: LogRoute | None = None

    def next_id(self) -> int:
        """A request id never used by this Client."""
        return next(self._ids)

    def meta(self, progress: bool = False) -> RequestMeta:
        """The `_meta` of a new request (with a fresh progress token when `progress`)."""
        s = self.settings
        token: ProgressToken | UnsetType = f"progress-{next(self._tokens)}" if progress else UNSET
        caps = s.capabilities if s.capabilities is not None else s.handlers.capabilities()
        return RequestMeta(
            protocol_version=s.protocol_version,
            client_capabilities=with_tasks(caps) if s.declare_tasks else caps,
            client_info=s.client_info,
            progress_token=token,
            log_level=s.log_level if s.on_log is not None else UNSET,  # no handler: no logs
        )

    def log_route(self) -> LogRoute | None:
        """Where this Client's log messages go: its `on_log` (read at every request)."""
        handler = self.settings.on_log
        if handler is None:
            return None
        if self._logs is None or self._logs.handler is not handler:
            self._logs = LogRoute(handler)
        return self._logs

    async def bounded(self, work: Awaitable[ResultT]) -> ResultT:
        """Await `work` within the Client `timeout` (raises TimeoutError)."""
        return await bounded(work, self.settings.timeout)

    async def send_bounded(self, request: FlowRequest | TaskRequest) -> object:
        """`send` within the Client `timeout`."""
        return await self.bounded(self.send(request))

    async def expect(self, request: Request, expect: type[ResultT]) -> ResultT:
        """`send`, raising UnexpectedResult unless the result is an `expect`."""
        result = await self.send(request)
        if not isinstance(result, expect):
            raise UnexpectedResult(f"expected {expect.__name__}, got {type(result).__name__}")
        return result

    # -- idempotency keys ------------------------------------------------------------------
    def server_capabilities(self) -> ServerCapabilities | None:
        """What the server declared, as far as this Client has seen (None: nothing yet)."""
        if self._server is not None:
            return self._server
        era = self.settings.era
        if era.session is not None and era.session.result is not None:
            return era.session.result.capabilities
        return era.capabilities

    async def idempotency_key(self, given: str | None) -> str | UnsetType:
        """The key of a new tools/call: `given`, a fresh uuid4 when the server declared
        `tools.idempotency`, else none. Raises ValueError for a malformed `given`."""
        if given is not None and not valid_idempotency_key(given):
            raise ValueError("an idempotency key is 1 to 255 visible ASCII characters")
        if self.server_capabilities() is None and self.settings.era.mode != "modern":
            # Free: the era probe (the first request of an "auto" Client) or, in a 2025
            # session, answered from `initialize`. A "modern" Client learns it from discover().
            try:
                await self.settings.discover()
            except ProtocolError:
                self._server = ServerCapabilities()
        if given is not None:
            return given
        return str(uuid.uuid4()) if self.declares_idempotency() else UNSET

    def declares_idempotency(self) -> bool:
        caps = self.server_capabilities()
        return caps is not None and idempotency_declared(caps.tools)

    async def send(self, request: Request, *, progress: ProgressHandler | None = None) -> object:
        """Send one request; return its decoded result; raise `mrtr.errors` for wire errors.

        A keyed tools/call to a server that declared `tools.idempotency` is resent with the
        same key (and a new id) while the server says the key is in progress or its outcome
        pending, and after a transport failure, within `limits`.
        """
        if not (isinstance(request, CallToolRequest)
                and request.params.idempotency_key is not UNSET and self.declares_idempotency()):
            return await self._send(request, progress)
        limits, busy, broken = self.settings.limits, 0, 0
        while True:
            try:
                return await self._send(request, progress)
            except (IdempotencyKeyInProgress, OutcomePending) as exc:
                busy += 1
                if busy > limits.max_busy_retries:
                    raise
                wait = exc.retry_after if exc.retry_after is not None else 1.0
                await asyncio.sleep(min(max(wait, 0.01), limits.max_poll_interval))
            except TransportError:
                broken += 1
                if broken > limits.max_transport_retries:
                    raise
                await asyncio.sleep(0.1 * 2 ** (broken - 1))
            request = msgspec.structs.replace(request, id=self.next_id())

    async def _send(self, request: Request, progress: ProgressHandler | None) -> object:
        era = self.settings.era
        for attempt in (1, 2):
            headers = await self._headers(request)
            sink = notification_sink(request, progress, self.log_route())
            raw = await era.request(request, headers=headers, notify=sink)
            message = decode_reply(raw, request.method)
            if isinstance(message, JSONRPCResultResponse):
                if message.id != request.id:
                    raise UnexpectedResult(f"response id {message.id!r} != {request.id!r}")
                if isinstance(message.result, CreateTaskResult) and (  # never in 2025
                        not self.settings.declare_tasks or era.session is not None):
                    raise UnexpectedResult("a task, but the tasks extension was not declared")
                if isinstance(message.result, DiscoverResult):
                    self._server = message.result.capabilities
                return message.result
            if not isinstance(message, JSONRPCErrorResponse):
                raise UnexpectedResult("the server sent a notification instead of a response")
            error = from_wire(message.error)
            retry = self._recover(error, request) if attempt == 1 else None
            if retry is None:
                raise error
            request = retry
        raise AssertionError("unreachable")

    def _recover(self, error: ProtocolError, request: Request) -> Request | None:
        """The request to retry after `error`, or None to raise it."""
        if isinstance(error, UnsupportedProtocolVersion):
            version = next((v for v in SUPPORTED_VERSIONS if v in error.supported), None)
            if version is None:
                return None
            self.settings.protocol_version = version
        elif isinstance(error, HeaderMismatch) and isinstance(request, CallToolRequest):
            self.tools.forget()
            self.cache.invalidate("tools/list")
        else:
            return None
        version = self.settings.protocol_version
        meta = msgspec.structs.replace(request.params.meta, protocol_version=version)
        params = msgspec.structs.replace(request.params, meta=meta)
        return msgspec.structs.replace(request, id=self.next_id(), params=params)

    async def _headers(self, request: Request) -> dict[str, str]:
        if not self.settings.transport.sends_headers:
            return {}
        header_map: Mapping[str, str] = {}
        if isinstance(request, CallToolRequest):
            if not self.tools.listed:
                await self.settings.list_tools(refresh=True)
            header_map = self.tools.header_map(request.params.name)
        return request_headers(request, header_map)
