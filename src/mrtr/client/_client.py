"""`Client`: requests with per-request `_meta` and headers, version retry, lists, MRTR flows."""

# Design: every request is built complete (fresh id, `_meta`, headers) and sent in one place,
# the `Requester` this Client shares with `client.tasks`; it also owns the version and header
# recoveries. MRTR rounds are not here: they are `call_flow` (sans-I/O) run by `drive`, with
# `fulfil` answering input requests. Every public call runs under one deadline
# (`Requester.bounded`): no stall of a server (silence, keep-alives, an endless cursor chain)
# may outlive `timeout`.
from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence, Sized
from types import TracebackType
from typing import TypeVar

from mrtr.protocol import (
    METHODS,
    SUPPORTED_VERSIONS,
    UNSET,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    CompleteRequest,
    CompleteRequestParams,
    CompleteResult,
    CompletionArgument,
    CompletionContext,
    DiscoverRequest,
    DiscoverResult,
    GetPromptRequest,
    GetPromptRequestParams,
    GetPromptResult,
    Implementation,
    JSONObject,
    ListPromptsRequest,
    ListPromptsResult,
    ListResourcesRequest,
    ListResourcesResult,
    ListResourceTemplatesRequest,
    ListResourceTemplatesResult,
    ListToolsRequest,
    ListToolsResult,
    LoggingLevel,
    PaginatedRequestParams,
    Prompt,
    PromptReference,
    ReadResourceRequest,
    ReadResourceRequestParams,
    ReadResourceResult,
    RequestParams,
    Resource,
    ResourceTemplate,
    ResourceTemplateReference,
    Tool,
    UnsetType,
    valid_idempotency_key,
)

from ._checkpoint import load_checkpoint
from ._era import Era, Mode
from ._flow import FlowRequest, Fulfil, Step, TaskRequest, call_flow, drive
from ._handlers import Handlers, fulfil
from ._limits import ClientLimits
from ._paging import Page, walk
from ._requester import Requester
from ._requests import ListRequest, LogHandler, ProgressHandler, default_client_info
from ._stepping import ManualFlow
from ._tasks import TaskObserver, Tasks, TaskState, abandon_on_exit, send_cancel
from ._telemetry import ClientTelemetry
from .transports._base import InProcess, Transport
from .transports._targets import transport_for

__all__ = ["Client"]

ResultT = TypeVar("ResultT")
PageT = TypeVar("PageT", bound=Page)
DEFAULT_TIMEOUT = 300.0


class Client:
    """An MCP 2026-07-28 client over any Transport; use as an async context manager.

    `transport` may also be a URL, a command line or an in-process Server (`mrtr.connect`).
    `handlers` decide the declared capabilities unless `capabilities` is given (for manual
    stepping, where no handler answers); `max_rounds` caps MRTR rounds per call;
    `timeout` (seconds, None for no deadline) bounds each whole call, all pages, rounds and
    handlers included (raises TimeoutError); `limits` caps pages and input requests.
    `mode`: "auto" probes once for 2026-07-28 or `initialize` (2025); see docs/client.md.
    `declare_tasks=False` stops declaring the tasks extension (`client.tasks`, docs/client.md).
    `on_log` receives the server's log messages at `log_level` and above (asked in each
    request's `_meta`, or with `logging/setLevel` from a 2025 server); without it, none are sent.
    """

    def __init__(
        self,
        transport: Transport | str | Sequence[str] | InProcess,
        *,
        handlers: Handlers | None = None,
        capabilities: ClientCapabilities | None = None,
        max_rounds: int = 10,
        timeout: float | None = DEFAULT_TIMEOUT,
        limits: ClientLimits | None = None,
        client_info: Implementation | None = None,
        clock: Callable[[], float] = time.monotonic,
        mode: Mode = "auto",
        declare_tasks: bool = True,
        on_log: LogHandler | None = None,
        log_level: LoggingLevel = "info",
    ) -> None:
        self.transport = transport_for(transport)
        self.handlers = handlers or Handlers()
        self.capabilities = capabilities  # None: follow the handlers
        self.max_rounds = max_rounds
        self.timeout = timeout
        self.limits = limits or ClientLimits()
        self.client_info = client_info or default_client_info()
        self.protocol_version = SUPPORTED_VERSIONS[0]
        self.on_log = on_log
        self.log_level: LoggingLevel = log_level
        self.era = Era(self.transport, mode, handlers=self.handlers, client_info=self.client_info,
                       log_level=log_level if on_log is not None else None)
        self.declare_tasks = declare_tasks
        self._wire = Requester(self, clock)
        self.tasks = Tasks(self, self._wire)
        self.telemetry = ClientTelemetry()  # spans per flow and round: docs/operations.md

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the transport."""
        await self.era.close()
        await self.transport.aclose()

    # -- plain requests ---------------------------------------------------------------------

    async def discover(self) -> DiscoverResult:
        """`server/discover` (cached for its `ttlMs`)."""
        cached = self._wire.cache.get("server/discover", DiscoverResult)
        if cached is not None:
            return cached
        wire = self._wire
        request = DiscoverRequest(id=wire.next_id(), params=RequestParams(meta=wire.meta()))
        result = await wire.bounded(wire.expect(request, DiscoverResult))
        self._wire.cache.put("server/discover", result, result.ttl_ms)
        return result

    async def list_tools(self, *, refresh: bool = False) -> list[Tool]:
        """All pages of `tools/list`; over HTTP, tools with invalid `x-mcp-header` are dropped.

        Raises ListTooLong past `limits.max_pages` / `limits.max_items`.
        """
        cached = None if refresh else self._wire.cache.get("tools/list", list)
        if cached is not None:
            return cached
        pages = await self._pages(
            lambda p: ListToolsRequest(id=self._wire.next_id(), params=p), ListToolsResult,
            lambda page: page.tools,
        )
        tools = self._wire.tools.index([t for page in pages for t in page.tools])
        self._wire.cache.put("tools/list", tools, min(p.ttl_ms for p in pages))
        return tools

    async def list_prompts(self) -> list[Prompt]:
        """All pages of `prompts/list` (capped like `list_tools`)."""
        pages = await self._pages(
            lambda p: ListPromptsRequest(id=self._wire.next_id(), params=p), ListPromptsResult,
            lambda page: page.prompts,
        )
        return [item for page in pages for item in page.prompts]

    async def list_resources(self) -> list[Resource]:
        """All pages of `resources/list` (capped like `list_tools`)."""
        pages = await self._pages(
            lambda p: ListResourcesRequest(id=self._wire.next_id(), params=p),
            ListResourcesResult, lambda page: page.resources,
        )
        return [item for page in pages for item in page.resources]

    async def list_resource_templates(self) -> list[ResourceTemplate]:
        """All pages of `resources/templates/list` (capped like `list_tools`)."""
        pages = await self._pages(
            lambda p: ListResourceTemplatesRequest(id=self._wire.next_id(), params=p),
            ListResourceTemplatesResult, lambda page: page.resource_templates,
        )
        return [item for page in pages for item in page.resource_templates]

    async def complete(
        self,
        ref: PromptReference | ResourceTemplateReference,
        argument: str,
        value: str,
        *,
        context: Mapping[str, str] | None = None,
    ) -> CompleteResult:
        """`completion/complete` for one argument of a prompt or resource template."""
        params = CompleteRequestParams(
            ref=ref,
            argument=CompletionArgument(name=argument, value=value),
            context=CompletionContext(arguments=dict(context)) if context else UNSET,
            meta=self._wire.meta(),
        )
        request = CompleteRequest(id=self._wire.next_id(), params=params)
        return await self._wire.bounded(self._wire.expect(request, CompleteResult))

    # -- MRTR requests ----------------------------------------------------------------------

    async def call_tool(
        self, name: str, arguments: JSONObject | None = None, *,
        progress: ProgressHandler | None = None, on_task: TaskObserver | None = None,
        idempotency_key: str | None = None,
    ) -> CallToolResult:
        """Call a tool, answering input requests and following a task, until its final result.

        The call carries `idempotency_key`, or a fresh one when the server declared
        `tools.idempotency`: the same on every round and retry of this call. Pass your own
        to retry a call yourself without a second effect (docs/client.md).
        """
        key = await self._wire.idempotency_key(idempotency_key)
        request = self._tool_request(name, arguments, progress is not None, key)
        return await self._flow(request, CallToolResult, progress, TaskState(observer=on_task))

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> GetPromptResult:
        """`prompts/get`, with MRTR rounds driven like `call_tool`."""
        params = GetPromptRequestParams(
            name=name, arguments=dict(arguments) if arguments is not None else UNSET,
            meta=self._wire.meta(),
        )
        return await self._flow(GetPromptRequest(id=self._wire.next_id(), params=params),
                                GetPromptResult, None)

    async def read_resource(self, uri: str) -> ReadResourceResult:
        """`resources/read`, with MRTR rounds driven like `call_tool`."""
        params = ReadResourceRequestParams(uri=uri, meta=self._wire.meta())
        return await self._flow(ReadResourceRequest(id=self._wire.next_id(), params=params),
                                ReadResourceResult, None)

    def start_tool_call(
        self, name: str, arguments: JSONObject | None = None, *,
        idempotency_key: str | None = None,
    ) -> ManualFlow[CallToolResult]:
        """A tool call stepped by hand: see ManualFlow (handlers are not used).

        It carries `idempotency_key`, or a fresh one if this Client has already seen the server
        declare `tools.idempotency` (after any earlier request of an "auto" Client, or
        `discover()`); the checkpoint keeps it."""
        key: str | UnsetType = UNSET
        if idempotency_key is not None or self._wire.declares_idempotency():
            key = idempotency_key if idempotency_key is not None else str(uuid.uuid4())
            if not valid_idempotency_key(key):
                raise ValueError("an idempotency key is 1 to 255 visible ASCII characters")
        request, state = self._tool_request(name, arguments, False, key), TaskState()
        flow = self._new_flow(request, CallToolResult, False, state)
        return ManualFlow(request, flow, send=self._wire.send_bounded, tasks=state)

    def resume(
        self, checkpoint: str | bytes
    ) -> ManualFlow[CallToolResult | GetPromptResult | ReadResourceResult]:
        """Continue a flow from `ManualFlow.checkpoint()` (possibly made by another process)."""
        request, suspended = load_checkpoint(checkpoint)
        expect: type[CallToolResult | GetPromptResult | ReadResourceResult]
        expect = METHODS[request.method].result_type  # type: ignore[assignment]
        state = TaskState() if isinstance(request, CallToolRequest) else None
        flow = call_flow(
            request, expect, new_id=self._wire.next_id, new_meta=self._wire.meta,
            max_rounds=self.max_rounds, resume=suspended, limits=self.limits, tasks=state,
        )
        return ManualFlow(request, flow, send=self._wire.send_bounded, suspended=suspended,
                          tasks=state)

    # -- internals ----------------------------------------------------------------------------

    def _tool_request(
        self, name: str, arguments: JSONObject | None, progress: bool, key: str | UnsetType,
    ) -> CallToolRequest:
        params = CallToolRequestParams(
            name=name, arguments=arguments if arguments is not None else UNSET,
            idempotency_key=key, meta=self._wire.meta(progress),
        )
        return CallToolRequest(id=self._wire.next_id(), params=params)

    def _new_flow(
        self, request: FlowRequest, expect: type[ResultT], progress: bool,
        tasks: TaskState | None = None,
    ) -> Generator[Step, object, ResultT]:
        return call_flow(
            request, expect, new_id=self._wire.next_id,
            new_meta=lambda: self._wire.meta(progress),
            max_rounds=self.max_rounds, limits=self.limits, tasks=tasks,
        )

    async def _flow(
        self, request: FlowRequest, expect: type[ResultT], progress: ProgressHandler | None,
        tasks: TaskState | None = None,
    ) -> ResultT:
        async def send(req: FlowRequest | TaskRequest) -> object:
            return await self._wire.send(req, progress=progress)

        async def answer(step: Fulfil) -> Mapping[str, object]:
            return await fulfil(self.handlers, step.input_requests, step.round)

        flow = self._new_flow(request, expect, progress is not None, tasks)
        work = self._wire.bounded(drive(flow, send=send, fulfil=answer, telemetry=self.telemetry))
        return await abandon_on_exit(work, tasks, functools.partial(send_cancel, self._wire))

    async def _pages(
        self, make: Callable[[PaginatedRequestParams], ListRequest], page_type: type[PageT],
        items: Callable[[PageT], Sized],
    ) -> list[PageT]:
        kind: type = page_type
        method = next(m for m, spec in METHODS.items() if spec.result_type is kind)

        async def fetch(cursor: str | UnsetType) -> PageT:
            params = PaginatedRequestParams(cursor=cursor, meta=self._wire.meta())
            return await self._wire.expect(make(params), page_type)

        return await self._wire.bounded(walk(fetch, items, method=method, limits=self.limits))
