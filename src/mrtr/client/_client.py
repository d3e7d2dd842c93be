"""`Client`: requests with per-request `_meta` and headers, version retry, lists, MRTR flows."""

# Design: every request is built complete (fresh id, `_meta`, headers) in one place, `_send`,
# which also owns the two recoveries the spec suggests: -32022 → retry once with a version from
# `supported`, and -32020 on tools/call → re-list tools and retry once. MRTR rounds are not here:
# they are `call_flow` (sans-I/O) run by `drive`, with `fulfil` answering input requests.
# Every public call runs under one deadline (`_bounded`): no stall of a server (silence,
# keep-alives, an endless cursor chain) may outlive `timeout`.
from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence, Sized
from types import TracebackType
from typing import TypeVar

import msgspec

from mrtr.errors import HeaderMismatch, ProtocolError, UnsupportedProtocolVersion, from_wire
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
    CreateTaskResult,
    DiscoverRequest,
    DiscoverResult,
    GetPromptRequest,
    GetPromptRequestParams,
    GetPromptResult,
    Implementation,
    JSONObject,
    JSONRPCErrorResponse,
    JSONRPCResultResponse,
    ListPromptsRequest,
    ListPromptsResult,
    ListResourcesRequest,
    ListResourcesResult,
    ListResourceTemplatesRequest,
    ListResourceTemplatesResult,
    ListToolsRequest,
    ListToolsResult,
    PaginatedRequestParams,
    ProgressToken,
    Prompt,
    PromptReference,
    ReadResourceRequest,
    ReadResourceRequestParams,
    ReadResourceResult,
    RequestMeta,
    RequestParams,
    Resource,
    ResourceTemplate,
    ResourceTemplateReference,
    Tool,
    UnsetType,
)

from ._cache import TTLCache
from ._checkpoint import load_checkpoint
from ._deadline import bounded
from ._era import Era, Mode
from ._errors import UnexpectedResult
from ._flow import FlowRequest, Fulfil, Step, TaskRequest, call_flow, drive
from ._handlers import Handlers, fulfil
from ._limits import ClientLimits
from ._paging import Page, walk
from ._requests import (
    ListRequest,
    ProgressHandler,
    Request,
    decode_reply,
    default_client_info,
    progress_sink,
    request_headers,
)
from ._stepping import ManualFlow
from ._tasks import TaskObserver, Tasks, TaskState, abandon_on_exit, with_tasks
from ._telemetry import ClientTelemetry
from ._tools import ToolIndex
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
    ) -> None:
        self.transport = transport_for(transport)
        self.handlers = handlers or Handlers()
        self.capabilities = capabilities  # None: follow the handlers
        self.max_rounds = max_rounds
        self.timeout = timeout
        self.limits = limits or ClientLimits()
        self.client_info = client_info or default_client_info()
        self.protocol_version = SUPPORTED_VERSIONS[0]
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self._cache = TTLCache(clock)
        self._tools = ToolIndex(check_headers=self.transport.sends_headers)
        self.era = Era(self.transport, mode, handlers=self.handlers, client_info=self.client_info)
        self.declare_tasks = declare_tasks
        self.tasks = Tasks(self)
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
        cached = self._cache.get("server/discover", DiscoverResult)
        if cached is not None:
            return cached
        request = DiscoverRequest(id=self._next_id(), params=RequestParams(meta=self._meta()))
        result = await self._bounded(self._expect(request, DiscoverResult))
        self._cache.put("server/discover", result, result.ttl_ms)
        return result

    async def list_tools(self, *, refresh: bool = False) -> list[Tool]:
        """All pages of `tools/list`; over HTTP, tools with invalid `x-mcp-header` are dropped.

        Raises ListTooLong past `limits.max_pages` / `limits.max_items`.
        """
        cached = None if refresh else self._cache.get("tools/list", list)
        if cached is not None:
            return cached
        pages = await self._pages(
            lambda p: ListToolsRequest(id=self._next_id(), params=p), ListToolsResult,
            lambda page: page.tools,
        )
        tools = self._tools.index([t for page in pages for t in page.tools])
        self._cache.put("tools/list", tools, min(p.ttl_ms for p in pages))
        return tools

    async def list_prompts(self) -> list[Prompt]:
        """All pages of `prompts/list` (capped like `list_tools`)."""
        pages = await self._pages(
            lambda p: ListPromptsRequest(id=self._next_id(), params=p), ListPromptsResult,
            lambda page: page.prompts,
        )
        return [item for page in pages for item in page.prompts]

    async def list_resources(self) -> list[Resource]:
        """All pages of `resources/list` (capped like `list_tools`)."""
        pages = await self._pages(
            lambda p: ListResourcesRequest(id=self._next_id(), params=p), ListResourcesResult,
            lambda page: page.resources,
        )
        return [item for page in pages for item in page.resources]

    async def list_resource_templates(self) -> list[ResourceTemplate]:
        """All pages of `resources/templates/list` (capped like `list_tools`)."""
        pages = await self._pages(
            lambda p: ListResourceTemplatesRequest(id=self._next_id(), params=p),
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
            meta=self._meta(),
        )
        request = CompleteRequest(id=self._next_id(), params=params)
        return await self._bounded(self._expect(request, CompleteResult))

    # -- MRTR requests ----------------------------------------------------------------------

    async def call_tool(
        self, name: str, arguments: JSONObject | None = None, *,
        progress: ProgressHandler | None = None, on_task: TaskObserver | None = None,
    ) -> CallToolResult:
        """Call a tool, answering input requests and following a task, until its final result."""
        request = self._tool_request(name, arguments, progress is not None)
        return await self._flow(request, CallToolResult, progress, TaskState(observer=on_task))

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> GetPromptResult:
        """`prompts/get`, with MRTR rounds driven like `call_tool`."""
        params = GetPromptRequestParams(
            name=name, arguments=dict(arguments) if arguments is not None else UNSET,
            meta=self._meta(),
        )
        return await self._flow(GetPromptRequest(id=self._next_id(), params=params),
                                GetPromptResult, None)

    async def read_resource(self, uri: str) -> ReadResourceResult:
        """`resources/read`, with MRTR rounds driven like `call_tool`."""
        params = ReadResourceRequestParams(uri=uri, meta=self._meta())
        return await self._flow(ReadResourceRequest(id=self._next_id(), params=params),
                                ReadResourceResult, None)

    def start_tool_call(
        self, name: str, arguments: JSONObject | None = None
    ) -> ManualFlow[CallToolResult]:
        """A tool call stepped by hand: see ManualFlow (handlers are not used)."""
        request, state = self._tool_request(name, arguments, False), TaskState()
        flow = self._new_flow(request, CallToolResult, False, state)
        return ManualFlow(request, flow, send=self._send_bounded, tasks=state)

    def resume(
        self, checkpoint: str | bytes
    ) -> ManualFlow[CallToolResult | GetPromptResult | ReadResourceResult]:
        """Continue a flow from `ManualFlow.checkpoint()` (possibly made by another process)."""
        request, suspended = load_checkpoint(checkpoint)
        expect: type[CallToolResult | GetPromptResult | ReadResourceResult]
        expect = METHODS[request.method].result_type  # type: ignore[assignment]
        state = TaskState() if isinstance(request, CallToolRequest) else None
        flow = call_flow(
            request, expect, new_id=self._next_id, new_meta=self._meta,
            max_rounds=self.max_rounds, resume=suspended, limits=self.limits, tasks=state,
        )
        return ManualFlow(request, flow, send=self._send_bounded, suspended=suspended,
                          tasks=state)

    # -- internals ----------------------------------------------------------------------------

    def _tool_request(
        self, name: str, arguments: JSONObject | None, progress: bool
    ) -> CallToolRequest:
        params = CallToolRequestParams(
            name=name, arguments=arguments if arguments is not None else UNSET,
            meta=self._meta(progress),
        )
        return CallToolRequest(id=self._next_id(), params=params)

    def _new_flow(
        self, request: FlowRequest, expect: type[ResultT], progress: bool,
        tasks: TaskState | None = None,
    ) -> Generator[Step, object, ResultT]:
        return call_flow(
            request, expect, new_id=self._next_id, new_meta=lambda: self._meta(progress),
            max_rounds=self.max_rounds, limits=self.limits, tasks=tasks,
        )

    async def _flow(
        self, request: FlowRequest, expect: type[ResultT], progress: ProgressHandler | None,
        tasks: TaskState | None = None,
    ) -> ResultT:
        async def send(req: FlowRequest | TaskRequest) -> object:
            return await self._send(req, progress=progress)

        async def answer(step: Fulfil) -> Mapping[str, object]:
            return await fulfil(self.handlers, step.input_requests, step.round)

        flow = self._new_flow(request, expect, progress is not None, tasks)
        work = self._bounded(drive(flow, send=send, fulfil=answer, telemetry=self.telemetry))
        return await abandon_on_exit(work, tasks, self.tasks._cancel)

    async def _bounded(self, work: Awaitable[ResultT]) -> ResultT:
        return await bounded(work, self.timeout)

    async def _send_bounded(self, request: FlowRequest | TaskRequest) -> object:
        return await self._bounded(self._send(request))

    def _next_id(self) -> int:
        return next(self._ids)

    def _meta(self, progress: bool = False) -> RequestMeta:
        token: ProgressToken | UnsetType = f"progress-{next(self._tokens)}" if progress else UNSET
        caps = self.capabilities if self.capabilities is not None else self.handlers.capabilities()
        return RequestMeta(
            protocol_version=self.protocol_version,
            client_capabilities=with_tasks(caps) if self.declare_tasks else caps,
            client_info=self.client_info,
            progress_token=token,
        )

    async def _pages(
        self, make: Callable[[PaginatedRequestParams], ListRequest], page_type: type[PageT],
        items: Callable[[PageT], Sized],
    ) -> list[PageT]:
        kind: type = page_type
        method = next(m for m, spec in METHODS.items() if spec.result_type is kind)

        async def fetch(cursor: str | UnsetType) -> PageT:
            params = PaginatedRequestParams(cursor=cursor, meta=self._meta())
            return await self._expect(make(params), page_type)

        return await self._bounded(walk(fetch, items, method=method, limits=self.limits))

    async def _expect(self, request: Request, expect: type[ResultT]) -> ResultT:
        result = await self._send(request)
        if not isinstance(result, expect):
            raise UnexpectedResult(f"expected {expect.__name__}, got {type(result).__name__}")
        return result

    async def _send(self, request: Request, *, progress: ProgressHandler | None = None) -> object:
        """Send one request; return its decoded result; raise `mrtr.errors` for wire errors."""
        for attempt in (1, 2):
            headers = await self._headers(request)
            sink = progress_sink(request, progress)
            raw = await self.era.request(request, headers=headers, notify=sink)
            message = decode_reply(raw, request.method)
            if isinstance(message, JSONRPCResultResponse):
                if message.id != request.id:
                    raise UnexpectedResult(f"response id {message.id!r} != {request.id!r}")
                if isinstance(message.result, CreateTaskResult) and (  # never in 2025 (§7)
                        not self.declare_tasks or self.era.session is not None):
                    raise UnexpectedResult("a task, but the tasks extension was not declared")
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
            self.protocol_version = version
        elif isinstance(error, HeaderMismatch) and isinstance(request, CallToolRequest):
            self._tools.forget()
            self._cache.invalidate("tools/list")
        else:
            return None
        meta = msgspec.structs.replace(request.params.meta, protocol_version=self.protocol_version)
        params = msgspec.structs.replace(request.params, meta=meta)
        return msgspec.structs.replace(request, id=self._next_id(), params=params)

    async def _headers(self, request: Request) -> dict[str, str]:
        if not self.transport.sends_headers:
            return {}
        header_map: Mapping[str, str] = {}
        if isinstance(request, CallToolRequest):
            if not self._tools.listed:
                await self.list_tools(refresh=True)
            header_map = self._tools.header_map(request.params.name)
        return request_headers(request, header_map)
