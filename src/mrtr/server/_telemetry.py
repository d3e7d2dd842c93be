"""ServerTelemetry: an OpenTelemetry SERVER span and metrics per request, inert without an SDK."""

# Design: `opentelemetry` is optional (mrtr[otel]); it is imported once, when the first
# ServerTelemetry is built, never per request. With the API installed but no SDK configured, the
# global providers are the API's proxies: a request then costs one provider look-up and no
# attribute building. Spans follow the OpenTelemetry MCP conventions (`{mcp.method.name}
# {target}`, kind SERVER, mcp.*, gen_ai.*, jsonrpc.request.id, error.type) plus mrtr.* attributes
# only this server knows: flow id, round, keys asked, outcome, the state rejection reason, store
# hits. Parent context: `_meta.traceparent` first, then the HTTP `traceparent` header (Peer). Each
# round's span context is sealed into the next round's state, so round N links to round N-1.
from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from mrtr.errors import InvalidRequestState
from mrtr.protocol import UNSET, CreateTaskResult, ElicitRequest, InputRequiredResult
from mrtr.server._peer import Peer
from mrtr.server._probe import Probe

__all__ = ["ServerTelemetry", "load_api"]

SCOPE = "mrtr"
_LOG = logging.getLogger("mrtr.telemetry")
_FLOW_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
_NAMED = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}
_TARGET = "mcp.resource.uri"  # the target of other methods: resources/read, resources/subscribe
_TASK = "mrtr.task.id"  # tasks/get, tasks/cancel, ... (the conventions have no task attribute)


@functools.cache
def load_api() -> Any:
    """The OpenTelemetry API pieces mrtr uses, or None when `opentelemetry` is not importable.

    Cached: an absent package costs one failed import per process, not one per request.
    """
    try:
        from opentelemetry import context, metrics, trace
        from opentelemetry.metrics import NoOpMeterProvider, Observation
        from opentelemetry.metrics import _internal as metrics_state
        from opentelemetry.trace import Link, NoOpTracerProvider, ProxyTracerProvider, SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        from opentelemetry.trace.status import Status, StatusCode
    except ImportError:
        return None
    return SimpleNamespace(
        trace=trace, metrics=metrics, context=context, Link=Link, SpanKind=SpanKind,
        Observation=Observation,
        Status=Status, StatusCode=StatusCode, propagator=TraceContextTextMapPropagator(),
        tracer_provider=_global(trace, "_TRACER_PROVIDER", trace.get_tracer_provider),
        meter_provider=_global(metrics_state, "_METER_PROVIDER", metrics.get_meter_provider),
        # Where those globals live, for `begin`'s test that neither is set (None: not known).
        globals=_where(trace, "_TRACER_PROVIDER", metrics_state, "_METER_PROVIDER"),
        inert=(ProxyTracerProvider, NoOpTracerProvider, NoOpMeterProvider,
               getattr(metrics_state, "_ProxyMeterProvider", NoOpMeterProvider)),
    )


def _global(module: Any, name: str, getter: Any) -> Any:
    """A per-request look-up of the global provider: None until one is set.

    The API's own getters test `os.environ` on every call while none is set (a few µs);
    reading the module's global is what keeps a server without an SDK at near zero cost.
    """
    getter()  # once: loads a provider named by OTEL_PYTHON_*_PROVIDER, as the API would
    if not hasattr(module, name):  # pragma: no cover - a future API version: the public way
        return getter
    return lambda: getattr(module, name)


def _where(tracing: Any, tracer: str, metering: Any, meter: str) -> Any:
    """The namespaces holding the two provider globals `_global` reads, with their names;
    None when this API version has either elsewhere (`begin` then asks as before)."""
    if not (hasattr(tracing, tracer) and hasattr(metering, meter)):
        return None
    return vars(tracing), tracer, vars(metering), meter


class Instruments:
    """The server's metric instruments, made once per MeterProvider."""

    def __init__(self, meter: Any, api: Any) -> None:
        self.duration = meter.create_histogram(
            "mcp.server.operation.duration", unit="s",
            description="MCP request duration as seen by the server")
        self.rounds = meter.create_histogram(
            "mrtr.server.flow.rounds", unit="{round}",
            description="Rounds a flow took, recorded when it completes")
        self.rejections = meter.create_counter(
            "mrtr.server.state.rejections", unit="{state}",
            description="requestState tokens rejected, by reason")
        # Counted here and observed at collection time: two SDK calls fewer per request.
        self.in_flight: dict[str, int] = {}
        meter.create_observable_up_down_counter(
            "mrtr.server.requests.in_flight", [self._observe_in_flight], unit="{request}",
            description="Requests being served")
        self._observation = api.Observation
        self.asks = meter.create_counter(
            "mrtr.server.asks", unit="{ask}", description="Input requests sent, by kind")
        self.store = meter.create_histogram(
            "mrtr.store.operation.duration", unit="s", description="Store call latency")

    def _observe_in_flight(self, options: object) -> list[Any]:
        return [self._observation(count, {"mcp.method.name": method})
                for method, count in list(self.in_flight.items())]


class ServerTelemetry:
    """Traces and metrics of one Dispatcher.

    `tracer_provider` and `meter_provider` default to OpenTelemetry's global ones, looked up
    per request (an SDK configured after the Dispatcher is built is picked up). Without the
    `opentelemetry` package every method is a no-op.
    """

    def __init__(self, *, tracer_provider: object = None, meter_provider: object = None) -> None:
        self.api = load_api()
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._tracer: tuple[object, Any] = (None, None)  # (provider, its tracer)
        self._meters: tuple[object, Instruments | None] = (None, None)
        # The API's provider globals, when this object has no providers of its own: while
        # neither is set (no SDK) `begin` returns after two dict look-ups, not six calls.
        self._globals: tuple[dict[str, Any], str, dict[str, Any], str] | None = (
            self.api.globals if self.api is not None and tracer_provider is None
            and meter_provider is None else None)

    @property
    def enabled(self) -> bool:
        """False when OpenTelemetry is not installed: nothing here can ever record."""
        return self.api is not None

    def recording(self) -> bool:
        """True when an SDK is configured now (a tracer or meter provider records)."""
        return self.enabled and (self.tracer() is not None or self.instruments() is not None)

    # -- providers -----------------------------------------------------------------------------
    def tracer(self) -> Any:
        """The tracer to use now, or None while no SDK is configured."""
        provider: Any = self._tracer_provider or self.api.tracer_provider()
        if provider is None:
            return None
        seen, tracer = self._tracer
        if seen is not provider:
            inert = isinstance(provider, self.api.inert)
            tracer = None if inert else provider.get_tracer(SCOPE)
            self._tracer = (provider, tracer)
        return tracer

    def instruments(self) -> Instruments | None:
        """The instruments to record with now, or None while no SDK is configured."""
        provider: Any = self._meter_provider or self.api.meter_provider()
        if provider is None:
            return None
        seen, instruments = self._meters
        if seen is not provider:
            inert = isinstance(provider, self.api.inert)
            instruments = None if inert else Instruments(provider.get_meter(SCOPE), self.api)
            self._meters = (provider, instruments)
        return instruments

    # -- one request ---------------------------------------------------------------------------
    def begin(self, probe: Probe, meta: Any, peer: Peer) -> None:
        """Start the request's span (and in-flight count) when an SDK is configured.

        Never raises: telemetry that fails is logged and the request goes on untraced.
        """
        unset = self._globals
        if unset is not None and unset[0].get(unset[1]) is None and unset[2].get(
                unset[3]) is None:
            return  # no SDK set up: as tracer() and instruments() would find, sooner
        try:
            self._begin(probe, meta, peer)
        except Exception:
            probe.span = None
            probe.started = 0.0
            _LOG.exception("telemetry failed at the start of %s", probe.method)

    def end(self, probe: Probe, result: object, error: BaseException | None) -> None:
        """Finish the span and record the metrics of a request that got `result` or `error`.

        Never raises (see `begin`).
        """
        try:
            self._end(probe, result, error)
        except Exception:
            _LOG.exception("telemetry failed at the end of %s", probe.method)

    def _begin(self, probe: Probe, meta: Any, peer: Peer) -> None:
        tracer = self.tracer()
        if tracer is not None:
            self._start_span(tracer, probe, meta, peer)
        instruments = self.instruments()
        if instruments is not None:
            probe.started = time.perf_counter()
            in_flight = instruments.in_flight
            in_flight[probe.method] = in_flight.get(probe.method, 0) + 1

    def _end(self, probe: Probe, result: object, error: BaseException | None) -> None:
        summary = _summary(result, error)
        span = probe.span
        if span is not None:
            self.api.context.detach(probe.attached)
            _finish_span(self.api, span, probe, summary)
        if probe.started:
            instruments = self.instruments()
            if instruments is not None:
                _record(instruments, probe, summary)

    def _start_span(self, tracer: Any, probe: Probe, meta: Any, peer: Peer) -> None:
        api = self.api
        parent = api.propagator.extract(_carrier(meta, peer))
        name = probe.method
        attributes: dict[str, Any] = {"mcp.method.name": name,
                                      "jsonrpc.request.id": str(probe.request_id),
                                      "network.transport": "pipe" if peer.transport == "stdio"
                                      else "tcp"}
        if peer.session_id is not None:  # a digest: a session id is a credential of sorts
            digest = hashlib.sha256(peer.session_id.encode()).hexdigest()[:16]
            attributes["mcp.session.id"] = digest
        version = getattr(meta, "protocol_version", None)
        if isinstance(version, str):
            attributes["mcp.protocol.version"] = version
        target = probe.target
        if target is not None:
            named = _NAMED.get(name)
            if named is not None:
                attributes[named] = target
                name = f"{name} {target}"
            else:
                attributes[_TASK if name.startswith("tasks/") else _TARGET] = target
        if probe.method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
        span = tracer.start_span(name, context=parent, kind=api.SpanKind.SERVER,
                                 attributes=attributes)
        probe.span = span
        probe.hooks = self
        # Current while the handler runs: spans the handler's own libraries make nest under it.
        probe.attached = api.context.attach(api.trace.set_span_in_context(span))

    # -- SpanHooks -----------------------------------------------------------------------------
    def link(self, span: object, trace: str) -> None:
        """Link `span` to the previous round's span, named by its sealed `traceparent`."""
        api = self.api
        context = api.propagator.extract({"traceparent": trace})
        previous = api.trace.get_current_span(context).get_span_context()
        if previous.is_valid:
            span.add_link(previous, {"mrtr.link": "previous_round"})  # type: ignore[attr-defined]

    def traceparent(self, span: object) -> str:
        """`span`'s context as a W3C traceparent, to seal into the next round's state."""
        context = span.get_span_context()  # type: ignore[attr-defined]
        return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def _carrier(meta: Any, peer: Peer) -> dict[str, str]:
    """The trace context to continue: the request's `_meta` wins over transport headers."""
    parent = getattr(meta, "traceparent", UNSET)
    if parent is not UNSET:
        carrier = {"traceparent": parent}
        state = getattr(meta, "tracestate", UNSET)
        if state is not UNSET:
            carrier["tracestate"] = state
        return carrier
    return dict(peer.trace_headers)


class _Summary:
    """What a request ended with, in telemetry's terms."""

    __slots__ = ("asks", "code", "outcome", "reason")

    def __init__(self, outcome: str, asks: Mapping[str, object] | None = None,
                 code: str | None = None, reason: str | None = None) -> None:
        self.outcome = outcome
        self.asks = asks or {}
        self.code = code
        self.reason = reason


def _summary(result: object, error: BaseException | None) -> _Summary:
    if result is None and error is None:
        return _Summary("cancelled", code="cancelled")  # the task was cancelled mid-request
    if error is not None:
        code = getattr(error, "code", None)
        reason = error.reason if isinstance(error, InvalidRequestState) else None
        return _Summary("error", code=str(code) if code is not None else type(error).__name__,
                        reason=reason)
    if isinstance(result, InputRequiredResult):
        asks = result.input_requests if result.input_requests is not UNSET else {}
        return _Summary("input_required", asks)
    if isinstance(result, CreateTaskResult):
        return _Summary("task")
    if getattr(result, "is_error", False) is True:
        return _Summary("complete", code="tool_error")
    return _Summary("complete")


def _ask_kind(request: object) -> str:
    if isinstance(request, ElicitRequest):
        mode = request.params.mode
        return "elicitation/url" if mode == "url" else "elicitation/form"
    return str(getattr(request, "method", type(request).__name__))


def _finish_span(api: Any, span: Any, probe: Probe, summary: _Summary) -> None:
    if not span.is_recording():  # sampled out: nothing would keep the attributes
        span.end()
        return
    attributes: dict[str, Any] = {"mrtr.round": probe.round, "mrtr.outcome": summary.outcome}
    if probe.flow_id:
        attributes["mrtr.flow.id"] = probe.flow_id
    if summary.asks:
        attributes["mrtr.asked.keys"] = sorted(summary.asks)
    if probe.store_hit:
        attributes["mrtr.store.hit"] = True
    if summary.code is not None:
        attributes["error.type"] = summary.code
        if summary.code != "tool_error":
            attributes["rpc.response.status_code"] = summary.code
        span.set_status(api.Status(api.StatusCode.ERROR))
    if summary.reason is not None:
        attributes["mrtr.state.rejection_reason"] = summary.reason
    span.set_attributes(attributes)
    span.end()


def _record(instruments: Instruments, probe: Probe, summary: _Summary) -> None:
    method = {"mcp.method.name": probe.method}
    in_flight = instruments.in_flight
    if probe.method in in_flight:  # absent only if the MeterProvider changed mid-request
        in_flight[probe.method] -= 1
    timed: dict[str, Any] = dict(method)
    if summary.code is not None:
        timed["error.type"] = summary.code
    instruments.duration.record(time.perf_counter() - probe.started, timed)
    if summary.reason is not None:
        instruments.rejections.add(1, {"mrtr.state.rejection_reason": summary.reason})
    for request in summary.asks.values():
        instruments.asks.add(1, {"mrtr.ask.kind": _ask_kind(request)})
    if summary.outcome == "complete" and probe.method in _FLOW_METHODS:
        instruments.rounds.record(probe.round, method)
