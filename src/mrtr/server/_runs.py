"""Runner: the methods that may take several rounds (tools/call, prompts/get, resources/read)."""

# Design: each method builds a Binding factory (computed only when a state is opened or sealed),
# opens the flow, runs the handler through the round engine and shapes the result. A tool's
# failure becomes its `isError` result here; prompts and resources let theirs reach the
# Dispatcher. Both go through _failures.py, the one place that decides what the client sees.
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, TypeVar

import msgspec

from mrtr.errors import InsufficientScope, InvalidParams, MissingRequiredClientCapability
from mrtr.protocol import (
    TASKS_EXTENSION,
    UNSET,
    CallToolRequest,
    CallToolResult,
    CreateTaskResult,
    GetPromptRequest,
    GetPromptResult,
    InputRequiredResult,
    ReadResourceRequest,
    ReadResourceResult,
    TextContent,
)
from mrtr.server._consent import CONFIRM_ARGUMENT, ConsentRefused, ConsentRequired, split_confirm
from mrtr.server._context import Context, StartTask
from mrtr.server._entries import ToolEntry
from mrtr.server._failures import tool_failure
from mrtr.server._peer import Notifier, Peer
from mrtr.server._registry import Server
from mrtr.server._results import checked_tool_result, prompt_result, resource_contents
from mrtr.server._rounds import InputRequired, Round, RoundEngine
from mrtr.server._schema import AskIfMissing
from mrtr.server._sealing import Binding, digest_arguments
from mrtr.server.tasks._runner import PreTask, TaskRunner

__all__ = ["Runner", "invoke_tool"]

_EMPTY_FLOW_DIGEST = digest_arguments({})


class Runner:
    """Runs handlers for one Server through one RoundEngine."""

    def __init__(
        self, server: Server, engine: RoundEngine, meta: dict[str, Any], log: logging.Logger,
        *, expose_errors: bool = False,
    ) -> None:
        self._server = server
        self._engine = engine
        self._meta = meta
        self._log = log
        self._expose = expose_errors  # `mrtr dev`: a tool's bug is shown to the client
        self.tasks: TaskRunner | None = None  # set by the Dispatcher: runs task tools

    def bare_context(self, request: Any, peer: Peer) -> Context:
        """A Context for handlers that never ask (completion): an ask there suspends, which the
        Dispatcher reports as a server bug."""
        return self._engine.open(UNSET, _unbound).context(
            request_id=request.id, meta=request.params.meta, peer=peer, input_responses={})

    def _open(
        self, request: Any, peer: Peer, sink: Notifier | None, target: str,
        arguments: object, flow_id: str = "",
    ) -> tuple[Round, Context]:
        """Open the round now (unseal any state; ProtocolError here) and build its Context.

        `flow_id` names a round 1's flow (an idempotency key's, see _idempotency.py)."""
        params = request.params
        bind = _LazyBinding(request.method, target, arguments, peer.principal)
        round_ = self._engine.open(params.request_state, bind)
        round_.meta = self._meta
        if flow_id and not round_.flow.flow_id:
            round_.flow.flow_id = flow_id
        responses = params.input_responses if params.input_responses is not UNSET else {}
        ctx = round_.context(request_id=request.id, meta=params.meta, peer=peer,
                             input_responses=responses, sink=sink)
        return round_, ctx

    def _redeem(
        self,
        round_: Round,
        request: Any,
        kind: type[R],
        finish: Callable[[], Awaitable[R | InputRequiredResult]],
    ) -> Awaitable[R | InputRequiredResult]:
        """`finish()`, run once per round when a store is set (see _ledger.py)."""
        ledger = self._engine.ledger
        round_id = round_.flow.round_id
        deadline = round_.deadline
        if ledger is None or not round_id or deadline is None:
            return finish()
        params = request.params
        responses = params.input_responses if params.input_responses is not UNSET else {}
        return ledger.redeem(round_id, responses, deadline, kind, finish)

    # -- tools/call ------------------------------------------------------------------------------
    def call_tool(
        self, request: CallToolRequest, peer: Peer, sink: Notifier | None, *, flow_id: str = ""
    ) -> Awaitable[CallToolResult | InputRequiredResult | CreateTaskResult]:
        # Not a coroutine: the Dispatcher awaits the round itself, so while a store records its
        # outcome nothing keeps the round, its Context and what hangs from them (~100 objects
        # a request for each collection of generation 0 to walk; the ledger drops the partial
        # once the handler ran: docs/performance.md, round 11).
        params = request.params
        entry = self._server.tables.tools.get(params.name)
        if entry is None or entry.scopes:  # unknown, or scoped: _tool raises or checks
            entry = self._tool(params.name, peer)
        arguments = params.arguments if params.arguments is not UNSET else {}
        token: object = None
        if CONFIRM_ARGUMENT in arguments:  # a confirmation token (server/_consent.py)
            arguments, token = split_confirm(arguments)
        if (entry.task is not None and self.tasks is not None
                and _tasked(entry, params.meta.client_capabilities.extensions)):
            return self._call_task_tool(request, peer, sink, entry, arguments, flow_id)

        if (not entry.wants_ctx and not entry.ask_if_missing and token is None
                and params.request_state is UNSET):
            return self._call_plain(request, peer, entry, arguments, flow_id)

        def invoke(ctx: Context) -> Awaitable[Any]:
            # Not a coroutine of its own: Round.run awaits what the handler returns (a bad
            # argument raises there, inside the same try).
            if entry.ask_if_missing:
                return invoke_tool(entry, ctx, arguments)
            args = entry.convert(arguments)
            return entry.call(ctx, **args) if entry.wants_ctx else entry.call(**args)

        round_, ctx = self._open(request, peer, sink, params.name, arguments, flow_id)
        round_.consent = entry.consent
        if token is not None:
            return self._confirmed(entry, round_, request, (token, arguments), peer,
                                   partial(self._finish_tool, entry, round_, invoke, ctx))
        if self._engine.ledger is not None and round_.flow.round_id:
            return self._redeem(round_, request, CallToolResult,
                                partial(self._finish_tool, entry, round_, invoke, ctx))
        return self._finish_tool(entry, round_, invoke, ctx)  # no store, or round 1

    def _tool(self, name: str, peer: Peer) -> ToolEntry:
        entry = self._server.tables.tools.get(name)
        if entry is None:
            raise InvalidParams(f"Unknown tool: {name}")
        if entry.scopes and not peer.allows(entry.scopes):
            raise InsufficientScope(sorted(entry.scopes))
        return entry

    async def _call_plain(
        self, request: CallToolRequest, peer: Peer, entry: ToolEntry, arguments: dict[str, Any],
        flow_id: str,
    ) -> CallToolResult | InputRequiredResult:
        """Round 1 of a tool that takes no Context: no Round, Context or Binding is built.

        Nothing of the round engine is reachable without a Context (no ask, `once`, progress,
        consent question or URL elicitation; no state to unseal, no round to redeem), except a
        guard-style InputRequired returned, which opens the round to seal its state."""
        try:
            out = await entry.call(**entry.convert(arguments))
            if isinstance(out, InputRequired):
                out = self._open(request, peer, None, entry.tool.name, arguments,
                                 flow_id)[0].returned(out)
        except Exception as exc:
            out = self._failure(exc, entry.tool.name)  # a ProtocolError is re-raised
        return self._tool_outcome(entry, out)

    async def _confirmed(
        self, entry: ToolEntry, round_: Round, request: CallToolRequest,
        presented: tuple[object, dict[str, Any]], peer: Peer,
        finish: Callable[[], Awaitable[CallToolResult | InputRequiredResult]],
    ) -> CallToolResult | InputRequiredResult:
        """`finish()` once per round (a store, not round 1), after using up the call's
        `_confirm` token (round 1 only; refused: nothing runs, see _consent.py)."""
        gate, params, (token, arguments) = self._engine.consent, request.params, presented
        if token is not None and gate is not None and params.request_state is UNSET:
            try:
                round_.grant = await gate.redeem(token, params.name, arguments, peer.principal)
            except ConsentRefused as exc:
                return self._tool_outcome(entry, self._failure(exc, params.name))
        return await self._redeem(round_, request, CallToolResult, finish)

    async def _call_task_tool(
        self, request: CallToolRequest, peer: Peer, sink: Notifier | None,
        entry: ToolEntry, arguments: dict[str, Any], flow_id: str,
    ) -> CallToolResult | InputRequiredResult | CreateTaskResult:
        """A task tool for a client that declared the tasks extension: a task, after any MRTR
        rounds before `ctx.begin_task()` (the round reaching it returns the task)."""
        tasks, meta = self.tasks, request.params.meta
        assert tasks is not None
        # LimitExceeded before anything runs: over max_arguments, or no room in the quota
        await tasks.book.check_arguments(peer.principal, arguments)
        round_, ctx = self._open(request, peer, sink, entry.tool.name, arguments, flow_id)
        if not entry.task_later:
            if not entry.ask_if_missing:
                try:
                    entry.convert(arguments)  # bad arguments fail now, not inside the task
                except Exception as exc:
                    return self._tool_outcome(entry, self._failure(exc, entry.tool.name))
            return await tasks.create(entry, meta, arguments, peer, round_.flow)
        ctx.task_hooks = PreTask()

        async def finish() -> Any:
            try:
                return await self._tool_result(
                    entry, round_.run(lambda c: invoke_tool(entry, c, arguments), ctx))
            except StartTask:
                if self._engine.ledger is not None:  # starting a task acts: claim the round
                    await self._engine.ledger.hold_round()
                return await tasks.create(entry, meta, arguments, peer, round_.flow)

        return await self._redeem(round_, request, CallToolResult, finish)

    def _finish_tool(
        self, entry: ToolEntry, round_: Round, invoke: Callable[[Context], Awaitable[Any]],
        ctx: Context,
    ) -> Awaitable[CallToolResult | InputRequiredResult]:
        return self._tool_result(entry, round_.run(invoke, ctx))

    async def _tool_result(
        self, entry: ToolEntry, run: Awaitable[Any]
    ) -> CallToolResult | InputRequiredResult:
        try:
            out = await run
        except Exception as exc:
            out = self._failure(exc, entry.tool.name)  # a ProtocolError is re-raised
        except ConsentRequired as need:
            return _asked_model(need, self._meta)
        return self._tool_outcome(entry, out)

    def _failure(self, exc: Exception, name: str) -> CallToolResult:
        return tool_failure(exc, name, self._log, expose=self._expose)

    def _tool_outcome(self, entry: ToolEntry, out: Any) -> CallToolResult | InputRequiredResult:
        if type(out) is str and out.isascii() and entry.check_output is None:  # the usual tool
            return CallToolResult(content=[TextContent(text=out)], meta=self._meta)  # as below
        if isinstance(out, InputRequiredResult):
            return _with_meta(out, self._meta)
        result = checked_tool_result(entry.tool.name, out, entry.check_output, self._log,
                                     entry.dump, self._meta)
        return _with_meta(result, self._meta)

    # -- prompts/get -----------------------------------------------------------------------------
    def get_prompt(
        self, request: GetPromptRequest, peer: Peer, sink: Notifier | None
    ) -> Awaitable[GetPromptResult | InputRequiredResult]:
        # Not a coroutine: the Dispatcher awaits the round itself, so nothing here holds the
        # round and its Context while a store records the outcome (see call_tool).
        params = request.params
        entry = self._server.tables.prompts.get(params.name)
        if entry is None:
            raise InvalidParams(f"Unknown prompt: {params.name}")
        arguments = dict(params.arguments) if params.arguments is not UNSET else {}
        missing = [name for name in entry.required if name not in arguments]
        if missing:
            raise InvalidParams(f"Missing required arguments: {', '.join(missing)}")
        known = {a.name for a in entry.prompt.arguments} if entry.prompt.arguments else set()
        args: dict[str, object] = {k: v for k, v in arguments.items() if k in known}
        if entry.convert is not None:  # pydantic parameters; ArgumentsInvalid is -32602
            args = entry.convert(args)

        async def invoke(ctx: Context) -> Any:
            given = await _asked_if_missing(ctx, entry.ask_if_missing, args)
            return await (entry.call(ctx, **given) if entry.wants_ctx else entry.call(**given))

        round_, ctx = self._open(request, peer, sink, params.name, arguments)
        description = entry.prompt.description

        async def finish() -> GetPromptResult | InputRequiredResult:
            out = await round_.run(invoke, ctx)
            if isinstance(out, InputRequiredResult):
                return _with_meta(out, self._meta)
            result = prompt_result(out, description if isinstance(description, str) else None)
            return _with_meta(result, self._meta)

        return self._redeem(round_, request, GetPromptResult, finish)

    # -- resources/read --------------------------------------------------------------------------
    def read_resource(
        self, request: ReadResourceRequest, peer: Peer, sink: Notifier | None
    ) -> Awaitable[ReadResourceResult | InputRequiredResult]:
        # Not a coroutine, as get_prompt.
        uri = request.params.uri
        entry = self._server.tables.resources.get(uri)
        variables: dict[str, str] = {}
        if entry is None:
            found = self._server.match_template(uri)
            if found is None:
                raise InvalidParams(f"Resource not found: {uri}", data={"uri": uri})
            entry, variables = found

        async def invoke(ctx: Context) -> Any:
            call, given = entry.call, await _asked_if_missing(ctx, entry.ask_if_missing, variables)
            return await (call(ctx, **given) if entry.wants_ctx else call(**given))

        round_, ctx = self._open(request, peer, sink, uri, None)
        cache = self._server.cache
        params = request.params
        retried = params.input_responses is not UNSET or params.request_state is not UNSET
        mime_type = entry.mime_type

        async def finish() -> ReadResourceResult | InputRequiredResult:
            out = await round_.run(invoke, ctx)
            if isinstance(out, InputRequiredResult):
                return _with_meta(out, self._meta)
            return ReadResourceResult(  # a retry's result must never be cached (CACHE-M-01)
                contents=resource_contents(out, uri, mime_type),
                ttl_ms=0 if retried else cache.ttl_ms,
                cache_scope="private" if retried else cache.scope,  # type: ignore[arg-type]
                meta=self._meta,
            )

        return self._redeem(round_, request, ReadResourceResult, finish)


class _LazyBinding:
    """The round's Binding, computed at most once and only when a state is sealed or opened."""

    __slots__ = ("arguments", "method", "principal", "target", "value")

    def __init__(self, method: str, target: str, arguments: object, principal: str | None) -> None:
        self.method = method
        self.target = target
        self.arguments = arguments
        self.principal = principal
        self.value: Binding | None = None

    def __call__(self) -> Binding:
        if self.value is None:
            digest = digest_arguments(self.arguments) if self.arguments else _EMPTY_FLOW_DIGEST
            self.value = Binding(method=self.method, target=self.target,
                                 arguments_digest=digest, principal=self.principal)
        return self.value


def _unbound() -> Binding:
    raise AssertionError("a bare context never seals a state")


def invoke_tool(entry: ToolEntry, ctx: Context, arguments: dict[str, Any]) -> Awaitable[Any]:
    """Call a tool's handler with its validated (or elicited) arguments."""

    async def invoke() -> Any:
        if entry.ask_if_missing:
            args = await _arguments(ctx, entry, arguments)
        else:
            args = entry.convert(arguments)
        return await (entry.call(ctx, **args) if entry.wants_ctx else entry.call(**args))

    return invoke()


def _tasked(entry: ToolEntry, extensions: object) -> bool:
    """Whether this call runs as a task; raises -32021 for a required task and no extension."""
    declared = isinstance(extensions, dict) and TASKS_EXTENSION in extensions
    if not declared and entry.task == "required":
        raise MissingRequiredClientCapability({"extensions": {TASKS_EXTENSION: {}}})
    return declared


async def _arguments(ctx: Context, entry: ToolEntry, arguments: dict[str, Any]) -> dict[str, Any]:
    """Validate arguments, first eliciting the AskIfMissing parameters the client left out."""
    return entry.convert(await _asked_if_missing(ctx, entry.ask_if_missing, arguments))


async def _asked_if_missing(
    ctx: Context, asks: Mapping[str, tuple[str, dict[str, object]]], arguments: dict[str, Any]
) -> dict[str, Any]:
    """`arguments` with the AskIfMissing ones the request left out (or sent as null) asked."""
    missing = {name: spec for name, spec in asks.items() if arguments.get(name) is None}
    if not missing:
        return arguments
    schema: dict[str, object] = {
        "type": "object",
        "properties": {name: prop for name, (_, prop) in missing.items()},
        "required": sorted(missing),
    }
    message = " ".join(text for text, _ in missing.values())  # AskIfMissing has a default text
    key = AskIfMissing.key(*missing)
    return {**arguments, **await ctx.elicit_schema(message, schema, key=key)}


R = TypeVar("R", bound=msgspec.Struct)


def _asked_model(need: ConsentRequired, meta: dict[str, Any]) -> CallToolResult:
    """The consent question for the model, with the server's `_meta` too."""
    own = need.result.meta if isinstance(need.result.meta, dict) else {}
    return msgspec.structs.replace(need.result, meta={**meta, **own})


def _with_meta(result: R, meta: dict[str, Any]) -> R:
    if getattr(result, "meta", None) is UNSET:
        return msgspec.structs.replace(result, meta=meta)
    return result
