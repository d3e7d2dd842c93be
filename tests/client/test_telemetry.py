"""Client telemetry: a flow span, a CLIENT span per round, `_meta.traceparent` on every round."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from mrtr.client import ClientTelemetry, Fulfil, TooManyRounds, call_flow, drive  # noqa: E402
from mrtr.client._flow import FlowRequest  # noqa: E402
from mrtr.protocol import (  # noqa: E402
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    ElicitRequest,
    ElicitRequestParams,
    InputRequiredResult,
    RequestMeta,
    TextContent,
)

META = RequestMeta(protocol_version="2026-07-28", client_capabilities=ClientCapabilities())
ASK = ElicitRequest(params=ElicitRequestParams(message="?", requested_schema={
    "type": "object", "properties": {}}))


def traced() -> tuple[ClientTelemetry, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return ClientTelemetry(tracer_provider=provider), exporter


def run_flow(telemetry: ClientTelemetry | None, rounds: int, max_rounds: int = 10) -> list[str]:
    """Drive a flow against a fake server asking `rounds - 1` times; the traceparents it saw."""
    seen: list[str] = []
    ids = iter(range(2, 100))

    async def send(request: FlowRequest) -> object:
        seen.append(str(request.params.meta.traceparent))
        if len(seen) < rounds:
            return InputRequiredResult(input_requests={"k": ASK}, request_state=f"s{len(seen)}")
        return CallToolResult(content=[TextContent(text="done")])

    async def fulfil(step: Fulfil) -> Mapping[str, object]:
        return {"k": {"action": "accept", "content": {}}}

    request = CallToolRequest(id=1, params=CallToolRequestParams(name="book", meta=META))
    flow = call_flow(request, CallToolResult, new_id=lambda: next(ids), new_meta=lambda: META,
                     max_rounds=max_rounds)
    asyncio.run(drive(flow, send=send, fulfil=fulfil, telemetry=telemetry))
    return seen


def test_each_round_is_a_client_span_under_one_flow_span_and_carries_its_context() -> None:
    telemetry, exporter = traced()
    seen = run_flow(telemetry, rounds=3)
    spans = exporter.get_finished_spans()
    flow = [s for s in spans if s.kind is SpanKind.INTERNAL]
    rounds = [s for s in spans if s.kind is SpanKind.CLIENT]
    assert len(flow) == 1 and len(rounds) == 3
    assert dict(flow[0].attributes or {}) == {"mcp.method.name": "tools/call",
                                              "gen_ai.tool.name": "book", "mrtr.rounds": 3}
    assert [s.name for s in rounds] == ["tools/call book"] * 3
    assert [dict(s.attributes or {})["mrtr.outcome"] for s in rounds] == [
        "input_required", "input_required", "complete"]
    assert seen == [f"00-{s.context.trace_id:032x}-{s.context.span_id:016x}-"
                    f"{s.context.trace_flags:02x}" for s in rounds]
    assert all(s.parent is not None and s.parent.span_id == flow[0].context.span_id
               for s in rounds)


def test_a_failed_flow_ends_its_span_with_the_error() -> None:
    telemetry, exporter = traced()
    with pytest.raises(TooManyRounds):
        run_flow(telemetry, rounds=5, max_rounds=2)
    flow = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.INTERNAL][0]
    assert flow.status.status_code is StatusCode.ERROR
    assert dict(flow.attributes or {})["error.type"] == "TooManyRounds"


def test_without_telemetry_or_sdk_requests_are_untouched() -> None:
    assert run_flow(None, rounds=2) == ["UNSET", "UNSET"]
    assert ClientTelemetry().flow() is None  # the global provider is the API's proxy in tests
    assert run_flow(ClientTelemetry(), rounds=2) == ["UNSET", "UNSET"]


def test_task_requests_of_a_flow_are_traced_with_their_task_id() -> None:
    """A task-augmented call polls with tasks/get: those rounds are spans too, not a crash."""
    from mrtr.protocol import (
        CreateTaskResult,
        GetTaskRequest,
        GetTaskRequestParams,
    )

    telemetry, exporter = traced()
    created = CreateTaskResult(task_id="t1", status="working", created_at="2026-07-28T00:00:00Z",
                               last_updated_at="2026-07-28T00:00:00Z", ttl_ms=None)
    replies = iter([created, CallToolResult(content=[TextContent(text="done")])])

    async def send(request: object) -> object:
        return next(replies)

    async def main() -> None:
        trace = telemetry.flow()
        assert trace is not None
        call = CallToolRequest(id=1, params=CallToolRequestParams(name="book", meta=META))
        poll = GetTaskRequest(id=2, params=GetTaskRequestParams(task_id="t1", meta=META))
        await trace.send(send, call)
        await trace.send(send, poll)
        trace.finish(None)

    asyncio.run(main())
    rounds = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CLIENT]
    assert [s.attributes["mrtr.outcome"] for s in rounds] == ["task", "complete"]
    assert rounds[1].name == "tasks/get" and rounds[1].attributes["mrtr.task.id"] == "t1"
