"""Dispatcher: the one place where requests meet handlers; every failure becomes a reply."""

# Design: check order as in conformance — decode (ParseError, InvalidRequest, missing _meta),
# headers (HeaderMismatch), version (-32022), method (-32601), capability (-32021), then params.
# Transports call `receive` then `handle` and write `Reply.body` with `Reply.http_status`; the
# body is encoded inside `handle`, so a result JSON cannot carry is a -32603 reply like any
# other failure (_failures.py decides which error and builds it), never a transport crash or a
# silent hang.
from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from mrtr.errors import MethodNotFound, ProtocolError
from mrtr.protocol import (
    IDEMPOTENCY_CAPABILITY,
    METHODS,
    SERVER_INFO_KEY,
    SUPPORTED_VERSIONS,
    TASKS_EXTENSION,
    UNSET,
    CallToolRequest,
    CancelledNotification,
    CompleteRequest,
    CompleteResult,
    Completion,
    DiscoverResult,
    PromptReference,
    ServerCapabilities,
    check_headers,
    check_version,
    decode_client_message,
)
from mrtr.server._asks import Suspend
from mrtr.server._completions import Completions
from mrtr.server._consent import ConsentGate
from mrtr.server._failures import error_reply, failed_reply
from mrtr.server._idempotency import IdempotencyKeys, IdempotencyPolicy
from mrtr.server._ledger import Ledger
from mrtr.server._limits import StoreLimits
from mrtr.server._listing import Lister
from mrtr.server._peer import Notifier, Peer
from mrtr.server._probe import Probe
from mrtr.server._registry import Server
from mrtr.server._reply import Reply
from mrtr.server._request_log import RequestLog
from mrtr.server._rounds import RoundEngine
from mrtr.server._runs import Runner, invoke_tool
from mrtr.server._sealing import Sealer
from mrtr.server._store_timing import TimedStore
from mrtr.server._telemetry import ServerTelemetry
from mrtr.server.tasks._listen import TaskListener
from mrtr.server.tasks._methods import TaskMethods
from mrtr.server.tasks._records import TaskBook, TaskPolicy
from mrtr.server.tasks._runner import TaskRunner
from mrtr.stores import MemoryStore, Store

if TYPE_CHECKING:
    from mrtr.server._in_process import MemoryTransport

__all__ = ["Dispatcher", "Reply"]


class _Default(enum.Enum):
    OWN = "own"  # Dispatcher(store=...) not given: a MemoryStore of its own
    KEEP = "keep"  # Dispatcher.replace(store=...) not given: the same choice as before


Message = Any  # a decoded ClientRequest or ClientNotification Struct
_KEYS = IdempotencyPolicy()  # the default: idempotency keys honoured whenever there is a store

# The server capability each method needs (None: always served), and the params attribute
# its `Mcp-Name` header mirrors.
_CAPABILITY_OF = {method: spec.server_capability for method, spec in METHODS.items()}
_NAME_ATTRIBUTE = {
    method: {"name": "name", "uri": "uri", "taskId": "task_id"}[spec.name_field]
    for method, spec in METHODS.items()
    if spec.name_field is not None
}


class Dispatcher:
    """The engine serving one Server's requests with one Sealer (and store, telemetry).

    `McpApp(server)` and `mrtr serve` build one; build it yourself to configure it (keys, store,
    max_rounds, telemetry, `idempotency`: an IdempotencyPolicy, or None to ignore keys) or to
    call `serve_stdio`.
    """

    def __init__(
        self,
        server: Server,
        *,
        sealer: Sealer | None = None,
        max_rounds: int = 16,
        logger: logging.Logger | None = None,
        store: Store | None | Literal[_Default.OWN] = _Default.OWN,
        tasks: TaskPolicy | None = None,
        telemetry: ServerTelemetry | None = None,
        lease: float = 30.0,
        on_unawaited_ask: Callable[[str], None] | None = None,
        idempotency: IdempotencyPolicy | None = _KEYS,
        expose_errors: bool = False,
        limits: StoreLimits | None = None,
    ) -> None:
        """`store` defaults to a MemoryStore of this Dispatcher's own (exactly-once in this
        process); None turns exactly-once off (a replayed round runs again). `tasks` and
        `limits` default to the Server's (`Server(tasks=..., limits=...)`).
        `expose_errors=True` (what `mrtr dev` sets) sends a handler's exception to the client
        instead of the frozen "Tool X failed." or -32603 text: for development only."""
        self.server = server
        self.max_rounds = max_rounds
        self.log = logger or logging.getLogger("mrtr.server")
        # One `info` line per request on `mrtr.requests` (docs/operations.md), when enabled.
        self.request_log = RequestLog()
        self.expose_errors = expose_errors
        # Design: an ephemeral key is the explicit single-process default; `mrtr serve` and
        # multi-replica deployments pass a Sealer built from the shared key ring.
        self.sealer = sealer if sealer is not None else Sealer.ephemeral(audience=server.name)
        meta = {SERVER_INFO_KEY: {"name": server.name, "version": server.version}}
        self.result_meta = meta
        # Design: with a store every round is single-use and ctx.once runs once per flow across
        # processes (_ledger.py). A Dispatcher built by hand gets a MemoryStore: exactly-once in
        # its process, never a silent re-run; `store_given` lets the process runner
        # (mrtr.serving._stores) swap that default for the store every process shares. None
        # keeps rounds replayable at no cost, when asked for.
        self.store_given = store is not _Default.OWN
        if store is _Default.OWN:
            store = MemoryStore()
        self.store: Store | None = store
        self._tasks = tasks
        # The byte limits on what the store keeps for callers (server/_limits.py).
        self.limits = limits if limits is not None else server.limits
        # ServerTelemetry (docs/operations.md): OpenTelemetry's global providers unless given.
        self.telemetry = telemetry if telemetry is not None else ServerTelemetry()
        self._traced = self.telemetry.enabled  # False: OpenTelemetry is not even installed
        if store is not None and self.telemetry.recording():
            store = TimedStore(store, self.telemetry)  # latency and replays: an SDK is set up
        # `lease`: how long a claim outlives a process that died holding it (docs/deploy.md).
        self.lease = lease
        ledger = (Ledger(store, self.log, lease=lease, max_outcome=self.limits.max_outcome)
                  if store is not None else None)
        self._ledger = ledger
        # A handler that returned with an ask it never awaited (a missing `await`): a warning in
        # the log unless told otherwise (TestClient fails the test).
        self.on_unawaited_ask = on_unawaited_ask
        engine = RoundEngine(self.sealer, max_rounds=max_rounds, ledger=ledger,
                             on_unawaited=on_unawaited_ask or self.log.warning)
        # Confirmation tokens for clients that cannot render ctx.confirm (docs/consent.md).
        engine.consent = ConsentGate(self.sealer, store, server.consent,
                                     audience=f"{server.name}/consent")
        # URL elicitations that complete: McpApp's completion route records them here.
        self.completions = engine.completions = Completions(
            self.sealer, store, audience=f"{server.name}/elicitation")
        self._lister = Lister(server, meta)
        self._runner = Runner(server, engine, meta, self.log, expose_errors=expose_errors)
        # Tasks live in the store (any replica answers); without one, in this process only.
        book = TaskBook(store if store is not None else MemoryStore(),
                        tasks if tasks is not None else server.tasks, self.limits)
        self.tasks = TaskRunner(server, engine, book, meta, self.log, invoke_tool)
        self.tasks.expose_errors = expose_errors
        self._runner.tasks = self.tasks
        # `idempotencyKey` on tools/call, with a store only (_idempotency.py, docs/deploy.md);
        # None: keys are ignored and `tools.idempotency` is not declared.
        self.idempotency_policy = idempotency
        self.idempotency = (IdempotencyKeys(ledger.store, idempotency, self.log,
                                            self._runner.call_tool, lease=lease)
                            if ledger is not None and idempotency is not None else None)
        task_methods = TaskMethods(self.tasks)
        self._routes: dict[str, Callable[[Any, Peer, Notifier | None], Any]] = {
            "server/discover": self._discover,
            "tools/list": self._lister.tools,
            "prompts/list": self._lister.prompts,
            "resources/list": self._lister.resources,
            "resources/templates/list": self._lister.templates,
            "tools/call": (self.idempotency.call_tool if self.idempotency is not None
                           else self._runner.call_tool),
            "prompts/get": self._runner.get_prompt,
            "resources/read": self._runner.read_resource,
            "completion/complete": self._complete,
            "tasks/get": task_methods.get,
            "tasks/update": task_methods.update,
            "tasks/cancel": task_methods.cancel,
            "subscriptions/listen": TaskListener(task_methods).listen,
        }

    def replace(self, *, sealer: Sealer | None = None,
                store: Store | None | Literal[_Default.KEEP] = _Default.KEEP,
                expose_errors: bool | None = None) -> Dispatcher:
        """A Dispatcher like this one with another `sealer`, `store` (None: no store) and/or
        `expose_errors`."""
        chosen: Store | None | Literal[_Default.OWN] = store if store is not _Default.KEEP else (
            self.store if self.store_given else _Default.OWN)
        expose = self.expose_errors if expose_errors is None else expose_errors
        return Dispatcher(self.server, sealer=sealer if sealer is not None else self.sealer,
                          max_rounds=self.max_rounds, logger=self.log, store=chosen,
                          tasks=self._tasks, telemetry=self.telemetry, lease=self.lease,
                          on_unawaited_ask=self.on_unawaited_ask, expose_errors=expose,
                          idempotency=self.idempotency_policy, limits=self.limits)

    # -- transport-facing ----------------------------------------------------------------------
    def in_process_transport(self, *, principal: str | None = None) -> MemoryTransport:
        """A client transport calling this Dispatcher in this process (`Client(dispatcher)`)."""
        from mrtr.server._in_process import MemoryTransport

        return MemoryTransport(self, principal=principal)

    def receive(self, body: bytes, headers: Mapping[str, str] | None = None) -> Message:
        """Decode one client message and, for HTTP, check its `Mcp-*` headers against it.

        `headers` have lower-cased names; None skips the header checks (stdio, in-memory).
        Raises a ProtocolError whose `request_id` is set when the id was readable.
        """
        message = decode_client_message(body)
        if headers is not None and not isinstance(message, CancelledNotification):
            if hasattr(message, "id"):
                try:
                    self._check_headers(message, headers)
                except ProtocolError as exc:
                    exc.request_id = message.id
                    raise
        return message

    async def handle(
        self, request: Message, peer: Peer, sink: Notifier | None = None
    ) -> Reply:
        """Serve one decoded request; every failure becomes an error Reply, never an exception."""
        # The Probe names the request in log lines and telemetry (docs/operations.md).
        method = request.method  # a property (the struct's tag): read once
        probe = Probe(request.id, method, _target(request, method), peer.principal)
        probe.enter()
        started = self.request_log.start()  # None: `mrtr.requests` is off, nothing is timed
        reply: Reply | None = None
        try:
            meta = request.params.meta
            if self._traced:
                self.telemetry.begin(probe, meta, peer)
            if meta.protocol_version not in SUPPORTED_VERSIONS:  # check_version, inline
                check_version(meta)
            route = self._routes.get(method)
            if route is None or not self._advertised(method):
                raise MethodNotFound(f"Method not found: {method}")
            reply = Reply(request.id, await route(request, peer, sink))  # encoded here: see Reply
            return reply
        except (Exception, Suspend, BaseExceptionGroup) as exc:
            # BaseExceptionGroup: e.g. an ask inside a task group of a completion handler.
            reply = self._failed(request, exc)
            return reply
        finally:
            if self._traced and (probe.span is not None or probe.started):
                self.telemetry.end(probe, reply.result if reply else None,
                                   reply.error if reply else None)
            if started is not None:
                self.request_log.write(probe, started, reply.result if reply else None,
                                    reply.error if reply else None)
            probe.leave()
            if reply is not None and reply.error is not None:
                # A raised error's traceback holds this frame, and it `reply`: no such cycle
                # (with the request's arguments in it) is left for the garbage collector.
                reply.error.__traceback__ = None

    def _failed(self, request: Message, exc: BaseException) -> Reply:
        return failed_reply(request.id, exc, _describe(request), self.log,
                            expose=self.expose_errors)

    async def handle_bytes(
        self,
        body: bytes,
        peer: Peer,
        *,
        headers: Mapping[str, str] | None = None,
        sink: Notifier | None = None,
    ) -> Reply | None:
        """`receive` + `handle`; None for a notification (HTTP answers 202)."""
        try:
            message = self.receive(body, headers)
        except ProtocolError as exc:
            return error_reply(exc.request_id, exc)
        if not hasattr(message, "id"):
            return None
        return await self.handle(message, peer, sink)

    async def drain(self, timeout: float = 10.0) -> bool:
        """Before the process stops: wait (up to `timeout` seconds) for `ctx.once` work and keyed
        calls (`idempotencyKey`) still running in the background for requests that went away,
        so that their outcomes are recorded rather than left to the lease (docs/deploy.md).
        True when nothing is left."""
        calls = await self.idempotency.drain(timeout) if self.idempotency is not None else True
        once = await self._ledger.drain(timeout) if self._ledger is not None else True
        return calls and once

    # -- helpers -------------------------------------------------------------------------------
    def _check_headers(self, message: Message, headers: Mapping[str, str]) -> None:
        params = message.params
        arguments: Mapping[str, object] | None = None
        header_map: Mapping[str, str] = {}
        method = message.method
        if isinstance(message, CallToolRequest):
            entry = self.server.tables.tools.get(params.name)
            arguments = params.arguments if params.arguments is not UNSET else {}
            header_map = entry.header_map if entry is not None else {}
            name: str | None = params.name  # its _target
        else:
            name = _target(message, method)
        check_headers(
            headers,
            protocol_version=params.meta.protocol_version,
            method=method,
            name=name,
            arguments=arguments,
            header_map=header_map,
        )

    def capabilities(self) -> ServerCapabilities:
        tables = self.server.tables
        return ServerCapabilities(
            tools=({IDEMPOTENCY_CAPABILITY: {}} if self.idempotency is not None else {})
            if tables.tools else UNSET,
            prompts={} if tables.prompts else UNSET,
            resources={} if tables.resources or tables.templates else UNSET,
            completions={} if tables.completions else UNSET,
            extensions=({TASKS_EXTENSION: {}}
                        if any(e.task is not None for e in tables.tools.values()) else UNSET),
        )

    def _advertised(self, method: str) -> bool:
        needed = _CAPABILITY_OF.get(method)
        if needed is None:
            return True
        # Per request: look at the tables directly rather than building ServerCapabilities.
        tables = self.server.tables
        if needed == "tools":
            return bool(tables.tools)
        if needed == "prompts":
            return bool(tables.prompts)
        if needed == "resources":
            return bool(tables.resources or tables.templates)
        if needed == "completions":
            return bool(tables.completions)
        return True

    async def _discover(self, request: Message, peer: Peer, sink: object) -> DiscoverResult:
        server = self.server
        return DiscoverResult(
            supported_versions=list(SUPPORTED_VERSIONS),
            capabilities=self.capabilities(),
            instructions=server.instructions if server.instructions is not None else UNSET,
            ttl_ms=server.cache.ttl_ms,
            cache_scope=server.cache.scope,  # type: ignore[arg-type]
            meta=self.result_meta,
        )

    async def _complete(self, request: CompleteRequest, peer: Peer, sink: object) -> CompleteResult:
        params = request.params
        ref = params.ref
        if isinstance(ref, PromptReference):
            key = ("ref/prompt", ref.name)
        else:
            key = ("ref/resource", ref.uri)
        entry = self.server.tables.completions.get(key)
        values: list[str] = []
        if entry is not None:
            context = {}
            if params.context is not UNSET and params.context.arguments is not UNSET:
                context = dict(params.context.arguments)
            args = (params.argument.name, params.argument.value, context)
            found = await (entry.call(self._runner.bare_context(request, peer), *args)
                           if entry.wants_ctx else entry.call(*args))
            values = [str(v) for v in found]
        if len(values) > 100:
            return CompleteResult(
                completion=Completion(values=values[:100], total=len(values), has_more=True),
                meta=self.result_meta,
            )
        return CompleteResult(completion=Completion(values=values), meta=self.result_meta)


def _target(request: Message, method: str) -> str | None:
    """The request's target: its tool or prompt name, resource URI or task id (`method` is the
    request's, read once by the caller: each read of the struct's tag builds an object)."""
    field = _NAME_ATTRIBUTE.get(method)
    return getattr(getattr(request, "params", None), field, None) if field is not None else None


def _describe(request: Message) -> str:
    """The request's id, method and target (tool, prompt or URI), for the log."""
    target = _target(request, request.method)
    what = f"{request.method} {target}" if target is not None else request.method
    return f"request {request.id!r} ({what})"
