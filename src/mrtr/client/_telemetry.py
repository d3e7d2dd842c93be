"""Client telemetry: one span per flow, a CLIENT child span per round, `traceparent` in `_meta`."""

# Design: optional like the server's (mrtr[otel]); the package is imported once, when the first
# ClientTelemetry is built. While no SDK is configured `flow()` returns None and `drive` sends
# the requests untouched. Each round's request carries its own CLIENT span's context in
# `_meta.traceparent` (the OpenTelemetry MCP conventions), so the server's span for that round
# is its child and all rounds of one call share one trace.
from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import msgspec

from mrtr.protocol import CreateTaskResult, InputRequiredResult

__all__ = ["ClientTelemetry", "FlowTrace"]

SCOPE = "mrtr"
_NAMED = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}


@functools.cache
def _load_api() -> Any:
    """The OpenTelemetry trace API, or None when it is not importable (looked up once)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return SimpleNamespace(
        get_tracer_provider=trace.get_tracer_provider,
        set_span_in_context=trace.set_span_in_context,
        SpanKind=trace.SpanKind, Status=trace.Status, StatusCode=trace.StatusCode,
        inert_providers=(trace.ProxyTracerProvider, trace.NoOpTracerProvider))


class ClientTelemetry:
    """Traces a Client's flows; `tracer_provider` defaults to OpenTelemetry's global one."""

    def __init__(self, *, tracer_provider: object = None) -> None:
        self._api = _load_api()
        self._provider = tracer_provider
        self._tracer: tuple[object, Any] = (None, None)

    def flow(self) -> FlowTrace | None:
        """A trace for one flow, or None when OpenTelemetry is absent or has no SDK."""
        api = self._api
        if api is None:
            return None
        provider: Any = self._provider or api.get_tracer_provider()
        if isinstance(provider, api.inert_providers):
            return None
        seen, tracer = self._tracer
        if seen is not provider:
            tracer = provider.get_tracer(SCOPE)
            self._tracer = (provider, tracer)
        return FlowTrace(api, tracer)


Request = Any  # a FlowRequest (CallToolRequest, GetPromptRequest, ReadResourceRequest)


class FlowTrace:
    """The spans of one flow: the flow's own, started at the first round, and one per round."""

    def __init__(self, api: Any, tracer: Any) -> None:
        self._api = api
        self._tracer = tracer
        self._span: Any = None
        self._context: Any = None
        self.rounds = 0

    async def send(self, send: Callable[[Request], Awaitable[object]], request: Request) -> object:
        """`send(request)` inside a CLIENT span whose context goes in `request`'s `_meta`."""
        api = self._api
        name, attributes = _describe(request)
        if self._span is None:
            self._span = self._tracer.start_span(name, attributes=attributes)
            self._context = api.set_span_in_context(self._span)
        self.rounds += 1
        span = self._tracer.start_span(
            name, context=self._context, kind=api.SpanKind.CLIENT,
            attributes={**attributes, "jsonrpc.request.id": str(request.id),
                        "mrtr.round": self.rounds})
        try:
            reply = await send(_with_traceparent(request, span.get_span_context()))
        except BaseException as exc:
            span.set_attribute("error.type", _error_type(exc))
            span.set_status(api.Status(api.StatusCode.ERROR))
            span.end()
            raise
        outcome = ("input_required" if isinstance(reply, InputRequiredResult)
                   else "task" if isinstance(reply, CreateTaskResult) else "complete")
        span.set_attribute("mrtr.outcome", outcome)
        span.end()
        return reply

    def finish(self, error: BaseException | None) -> None:
        """End the flow's span (after its last round, or when the flow failed)."""
        span = self._span
        if span is None:
            return
        span.set_attribute("mrtr.rounds", self.rounds)
        if error is not None:
            span.set_attribute("error.type", _error_type(error))
            span.set_status(self._api.Status(self._api.StatusCode.ERROR))
        span.end()


def _describe(request: Request) -> tuple[str, dict[str, Any]]:
    method: str = request.method
    attributes: dict[str, Any] = {"mcp.method.name": method}
    field = _NAMED.get(method)
    if field is None:  # resources/read, or a tasks/* request of a task-augmented call
        uri, task = getattr(request.params, "uri", None), getattr(request.params, "task_id", None)
        if uri is not None:
            attributes["mcp.resource.uri"] = uri
        if task is not None:
            attributes["mrtr.task.id"] = task
        return method, attributes
    target = request.params.name
    attributes[field] = target
    return f"{method} {target}", attributes


def _with_traceparent(request: Request, context: Any) -> Request:
    parent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    params = request.params
    meta = msgspec.structs.replace(params.meta, traceparent=parent)
    return msgspec.structs.replace(request, params=msgspec.structs.replace(params, meta=meta))


def _error_type(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return str(code) if isinstance(code, int) else type(exc).__name__
