"""Server telemetry with the OpenTelemetry SDK's in-memory exporters (no global providers)."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from typing import Any

import msgspec
import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind  # noqa: E402

from mrtr.server import (  # noqa: E402
    Context,
    Dispatcher,
    Form,
    Peer,
    Server,
    ServerTelemetry,
    SessionServer,
)
from mrtr.stores import MemoryStore  # noqa: E402

app = Server("telemetry-tests", version="1")


class Name(Form):
    name: str


@app.tool()
async def greet(ctx: Context) -> str:
    name = await ctx.elicit("Your name?", Name, key="name")
    again = await ctx.elicit("Really?", Name, key="again")
    return f"Hello {name.name} {again.name}"


@app.tool()
async def boom() -> str:
    raise RuntimeError("secret detail")


PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
HEADER_PARENT = "00-11111111111111111111111111111111-2222222222222222-01"


class Rig:
    """A Dispatcher traced into memory: its finished spans and recorded metrics."""

    def __init__(self, store: Any = None) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        telemetry = ServerTelemetry(tracer_provider=tracer_provider,
                              meter_provider=MeterProvider(metric_readers=[self.reader]))
        self.dispatcher = Dispatcher(app, telemetry=telemetry, store=store)

    def call(self, params: dict[str, Any], peer: Peer | None = None, **meta: str) -> Any:
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            **params, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                "io.modelcontextprotocol/clientCapabilities":
                                    {"elicitation": {"form": {}}}, **meta}}}
        reply = asyncio.run(self.dispatcher.handle_bytes(msgspec.json.encode(body),
                                                         peer or Peer()))
        assert reply is not None
        return msgspec.json.decode(reply.body)

    def server_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.kind is SpanKind.SERVER]

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [point for rm in data.resource_metrics for sm in rm.scope_metrics
                for metric in sm.metrics if metric.name == name
                for point in metric.data.data_points]


def three_rounds(rig: Rig) -> None:
    first = rig.call({"name": "greet"})["result"]
    second = rig.call({"name": "greet", "requestState": first["requestState"],
                       "inputResponses": {"name": {"action": "accept",
                                                   "content": {"name": "Ada"}}}})["result"]
    third = rig.call({"name": "greet", "requestState": second["requestState"],
                      "inputResponses": {"again": {"action": "accept",
                                                   "content": {"name": "Ada"}}}})["result"]
    assert third["content"][0]["text"] == "Hello Ada Ada"


def test_rounds_of_one_flow_share_flow_id_and_link_to_the_previous_round() -> None:
    rig = Rig()
    three_rounds(rig)
    spans = rig.server_spans()
    assert [s.name for s in spans] == ["tools/call greet"] * 3
    attrs = [dict(s.attributes or {}) for s in spans]
    assert [a["mrtr.round"] for a in attrs] == [1, 2, 3]
    assert [a["mrtr.outcome"] for a in attrs] == ["input_required", "input_required", "complete"]
    assert attrs[0]["mrtr.flow.id"] == attrs[1]["mrtr.flow.id"] == attrs[2]["mrtr.flow.id"] != ""
    assert attrs[0]["mrtr.asked.keys"] == ("name",) and attrs[1]["mrtr.asked.keys"] == ("again",)
    assert attrs[0]["mcp.method.name"] == "tools/call" and attrs[0]["gen_ai.tool.name"] == "greet"
    assert attrs[0]["jsonrpc.request.id"] == "7"
    assert not spans[0].links
    for earlier, later in zip(spans, spans[1:], strict=False):
        assert [link.context.span_id for link in later.links] == [earlier.context.span_id]
    assert [p.count for p in rig.points("mrtr.server.flow.rounds")] == [1]
    assert [p.sum for p in rig.points("mrtr.server.flow.rounds")] == [3]
    asks = rig.points("mrtr.server.asks")
    assert [(dict(p.attributes)["mrtr.ask.kind"], p.value) for p in asks] == [
        ("elicitation/form", 2)]
    assert sum(p.count for p in rig.points("mcp.server.operation.duration")) == 3
    assert [p.value for p in rig.points("mrtr.server.requests.in_flight")] == [0]


def test_tampered_state_span_names_the_rejection_reason_and_counts_it() -> None:
    rig = Rig()
    state = rig.call({"name": "greet"})["result"]["requestState"]
    tampered = state[:20] + ("A" if state[20] != "A" else "B") + state[21:]
    reply = rig.call({"name": "greet", "requestState": tampered})
    assert reply["error"] == {"code": -32602, "message": "Invalid or expired requestState"}
    span = rig.server_spans()[-1]
    attrs = dict(span.attributes or {})
    assert attrs["mrtr.state.rejection_reason"] == "tampered"
    assert attrs["error.type"] == "-32602" and attrs["mrtr.outcome"] == "error"
    counted = {dict(p.attributes)["mrtr.state.rejection_reason"]: p.value
               for p in rig.points("mrtr.server.state.rejections")}
    assert counted == {"tampered": 1}


def test_meta_traceparent_wins_over_the_transport_header() -> None:
    rig = Rig()
    peer = Peer(transport="http", trace_headers=(("traceparent", HEADER_PARENT),))
    rig.call({"name": "boom"}, peer, traceparent=PARENT)
    span = rig.server_spans()[-1]
    assert span.parent is not None
    assert f"{span.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert f"{span.parent.span_id:016x}" == "b7ad6b7169203331"
    assert dict(span.attributes or {})["error.type"] == "tool_error"


def test_the_transport_header_is_the_fallback_parent() -> None:
    rig = Rig()
    rig.call({"name": "boom"}, Peer(transport="http", trace_headers=(("traceparent",
                                                                       HEADER_PARENT),)))
    span = rig.server_spans()[-1]
    assert f"{span.context.trace_id:032x}" == "1" * 32


def test_a_replayed_round_is_marked_as_a_store_hit() -> None:
    rig = Rig(store=MemoryStore())
    first = rig.call({"name": "greet"})["result"]
    retry = {"name": "greet", "requestState": first["requestState"],
             "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}}
    assert rig.call(retry) == rig.call(retry)
    hits = [dict(s.attributes or {}).get("mrtr.store.hit") for s in rig.server_spans()]
    assert hits == [None, None, True]
    operations = {dict(p.attributes)["mrtr.store.operation"]
                  for p in rig.points("mrtr.store.operation.duration")}
    assert "put_if_absent" in operations  # a round that acts in no ctx.once: one write


def test_without_an_sdk_nothing_is_recorded_and_the_probe_is_left() -> None:
    dispatcher = Dispatcher(app)  # the global providers: the API's no-op proxies in tests
    assert dispatcher.telemetry.enabled and dispatcher.telemetry.tracer() is None
    assert dispatcher.telemetry.instruments() is None
    from mrtr.server._probe import current_probe

    body = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "boom", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    assert asyncio.run(dispatcher.handle_bytes(body, Peer())) is not None
    assert current_probe() is None


def test_31_without_an_sdk_no_provider_is_asked_and_one_set_later_traces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no SDK set up a request costs two look-ups of the API's globals, not the six calls
    of asking for a tracer and instruments; a provider set afterwards is used at once."""
    from opentelemetry import trace as api_trace

    dispatcher = Dispatcher(app)  # the global providers: none set in tests
    telemetry = dispatcher.telemetry
    asked: list[str] = []
    tracer, instruments = telemetry.tracer, telemetry.instruments
    monkeypatch.setattr(telemetry, "tracer", lambda: asked.append("tracer") or tracer())
    monkeypatch.setattr(telemetry, "instruments",
                        lambda: asked.append("instruments") or instruments())
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "boom", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    assert asyncio.run(dispatcher.handle_bytes(body, Peer())) is not None
    assert asked == []
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    monkeypatch.setattr(api_trace, "_TRACER_PROVIDER", provider)  # as set_tracer_provider()
    assert asyncio.run(dispatcher.handle_bytes(body, Peer())) is not None
    assert asked[:2] == ["tracer", "instruments"]
    assert [s.name for s in spans.get_finished_spans()] == ["tools/call boom"]


def test_a_2025_session_request_records_a_digest_of_its_session_id() -> None:
    rig = Rig()
    server = SessionServer(rig.dispatcher)
    session, _ = server.initialize({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}, Peer())
    assert session is not None

    async def outbound(message: bytes) -> None:
        pass

    message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "boom", "arguments": {}}}
    assert asyncio.run(server.serve(session, message, Peer(), outbound)) is not None
    attrs = dict(rig.server_spans()[-1].attributes or {})
    assert attrs["mcp.session.id"] == hashlib.sha256(session.id.encode()).hexdigest()[:16]
    assert session.id not in str(attrs)


def test_without_opentelemetry_the_import_is_tried_once_and_nothing_else_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mrtr.server._telemetry import load_api

    load_api.cache_clear()
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if not installed
    try:
        dispatchers = [Dispatcher(app, store=MemoryStore()) for _ in range(3)]
        assert not any(d.telemetry.enabled for d in dispatchers)
        assert load_api.cache_info().misses == 1
        ledger = dispatchers[0]._runner._engine.ledger
        assert ledger is not None and type(ledger.store) is MemoryStore  # not wrapped
        reply = asyncio.run(dispatchers[0].handle_bytes(msgspec.json.encode({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "boom", "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}}), Peer()))
        assert reply is not None and b"isError" in reply.body
    finally:
        load_api.cache_clear()


class BrokenTracerProvider(TracerProvider):
    """An SDK provider whose tracer fails: telemetry bugs must never fail a request."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        class Broken:
            def start_span(self, *args: Any, **kwargs: Any) -> Any:
                raise RuntimeError("exporter misconfigured")

        return Broken()


def test_failing_telemetry_is_logged_and_the_request_is_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = Rig()
    rig.dispatcher.telemetry = ServerTelemetry(tracer_provider=BrokenTracerProvider())
    first = rig.call({"name": "greet"})
    assert first["result"]["resultType"] == "input_required"
    assert any("telemetry failed" in r.getMessage() for r in caplog.records)


def test_a_sampled_out_request_is_served_and_exports_nothing() -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rig = Rig()
    rig.dispatcher.telemetry = ServerTelemetry(tracer_provider=provider)
    assert rig.call({"name": "greet"})["result"]["resultType"] == "input_required"
    assert exporter.get_finished_spans() == ()
