"""One trace across client and server over real HTTP (uvicorn + httpx), and OTLP export."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SimpleSpanProcessor,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind  # noqa: E402

from mrtr.client import Client, ClientTelemetry, Handlers, HTTPTransport  # noqa: E402
from mrtr.http import McpApp
from mrtr.protocol import ElicitRequestParams, ElicitResult  # noqa: E402
from mrtr.server import Dispatcher, ServerTelemetry  # noqa: E402
from tests.transports import apps  # noqa: E402
from tests.transports.conftest import (  # noqa: E402
    ROOT,
    LiveServer,
    asgi_client,
    call,
    cli_env,
    free_port,
    post_args,
    run,
)


async def answer(params: ElicitRequestParams) -> ElicitResult:
    field = "name" if "name" in params.message.lower() else "color"
    return ElicitResult(action="accept", content={field: "Ada" if field == "name" else "teal"})


def memory_tracing() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def greet_over_http(server_tracing: TracerProvider, client_tracing: TracerProvider) -> str:
    port = free_port()
    app = McpApp(Dispatcher(apps.app, telemetry=ServerTelemetry(tracer_provider=server_tracing)))

    async def go() -> str:
        async with Client(HTTPTransport(f"http://127.0.0.1:{port}/mcp"),
                          handlers=Handlers(elicitation=answer)) as client:
            client.telemetry = ClientTelemetry(tracer_provider=client_tracing)
            result = await client.call_tool("greet", {})
            text: str = result.content[0].text  # type: ignore[union-attr]
            return text

    with LiveServer(app, port):
        return asyncio.run(go())


def by_kind(spans: tuple[ReadableSpan, ...], kind: SpanKind) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.kind is kind), key=lambda s: s.start_time or 0)


def test_a_three_round_flow_is_one_trace_across_client_and_server() -> None:
    server_tracing, server_spans = memory_tracing()
    client_tracing, client_spans = memory_tracing()
    assert greet_over_http(server_tracing, client_tracing) == "Hello Ada, you like teal"

    finished = client_spans.get_finished_spans()
    flows = by_kind(finished, SpanKind.INTERNAL)
    rounds = by_kind(finished, SpanKind.CLIENT)
    assert len(flows) == 1 and len(rounds) == 3
    flow = flows[0]
    assert flow.name == "tools/call greet" and dict(flow.attributes or {})["mrtr.rounds"] == 3
    assert all(r.parent is not None and r.parent.span_id == flow.context.span_id for r in rounds)
    assert [dict(r.attributes or {})["mrtr.round"] for r in rounds] == [1, 2, 3]

    served = [s for s in by_kind(server_spans.get_finished_spans(), SpanKind.SERVER)
              if s.name == "tools/call greet"]  # the client also discovers and lists tools
    assert len(served) == 3
    trace_id = flow.context.trace_id
    assert {s.context.trace_id for s in served} == {trace_id}
    assert [s.parent.span_id if s.parent else None for s in served] == [
        r.context.span_id for r in rounds]
    attrs = [dict(s.attributes or {}) for s in served]
    assert [a["mrtr.round"] for a in attrs] == [1, 2, 3]
    assert len({a["mrtr.flow.id"] for a in attrs}) == 1
    assert [a["mrtr.outcome"] for a in attrs] == ["input_required", "input_required", "complete"]
    assert [len(s.links) for s in served] == [0, 1, 1]


class Receiver:
    """A minimal OTLP/HTTP trace receiver on 127.0.0.1: decodes each protobuf export request."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.got = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
                body = self.rfile.read(int(self.headers["content-length"]))
                if self.path == "/v1/traces":  # metrics may come too: acknowledged, not read
                    export = ExportTraceServiceRequest()
                    export.ParseFromString(body)
                    receiver.requests.append(export)
                    receiver.got.set()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def spans(self) -> list[Any]:
        return [span for export in self.requests for rs in export.resource_spans
                for ss in rs.scope_spans for span in ss.spans]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        thread.join(5)


def test_spans_reach_an_otlp_http_receiver(receiver: Receiver) -> None:
    server_tracing = TracerProvider()
    server_tracing.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.url, timeout=5)))
    client_tracing, _ = memory_tracing()
    try:
        greet_over_http(server_tracing, client_tracing)
        assert server_tracing.force_flush(10_000)
    finally:
        server_tracing.shutdown()
    assert receiver.got.wait(10)
    spans = [s for s in receiver.spans() if s.name.startswith("tools/call")]
    assert [s.name for s in spans] == ["tools/call greet"] * 3
    rounds = []
    for span in spans:
        values = {kv.key: kv.value for kv in span.attributes}
        rounds.append(values["mrtr.round"].int_value)
        assert values["mcp.method.name"].string_value == "tools/call"
        assert values["mrtr.flow.id"].string_value
    assert sorted(rounds) == [1, 2, 3]
    assert len({s.trace_id for s in spans}) == 1


META_PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
HEADER_PARENT = "00-11111111111111111111111111111111-2222222222222222-01"


@pytest.mark.parametrize(("in_meta", "trace_id"), [
    (True, "0af7651916cd43dd8448eb211c80319c"),  # _meta wins over the conflicting header
    (False, "1" * 32),  # the header is the fallback
])
def test_meta_traceparent_wins_over_the_http_header(in_meta: bool, trace_id: str) -> None:
    tracing, exporter = memory_tracing()
    app = McpApp(Dispatcher(apps.app, telemetry=ServerTelemetry(tracer_provider=tracing)))
    body = call("add", {"a": 1, "b": 2}, extra_meta={"traceparent": META_PARENT} if in_meta
                else None)

    async def go() -> int:
        async with asgi_client(app) as client:
            response = await client.post("/mcp", **post_args(body, traceparent=HEADER_PARENT))
            return response.status_code

    assert run(go()) == 200
    (span,) = exporter.get_finished_spans()
    assert f"{span.context.trace_id:032x}" == trace_id


DOC_RUNNER = """
import asyncio, runpy, sys
import msgspec
from mrtr.server import Dispatcher, Peer
ns = runpy.run_path(sys.argv[1])
app = ns["app"]

@app.tool()
async def ping() -> str:
    return "pong"

body = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "ping", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities": {}}}})
asyncio.run(Dispatcher(app).handle_bytes(body, Peer()))
ns["tracing"].shutdown()
"""


@pytest.mark.slow
def test_the_operations_doc_setup_exports_spans(receiver: Receiver, tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "operations.md").read_text()
    code = doc.split("\n## Tracing\n", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "app.py").write_text(code)
    env = {**cli_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url.rsplit("/v1/", 1)[0]}
    subprocess.run([sys.executable, "-c", DOC_RUNNER, str(tmp_path / "app.py")], env=env,
                   check=True, timeout=60, cwd=ROOT)
    assert receiver.got.wait(10)
    assert [s.name for s in receiver.spans()] == ["tools/call ping"]


def test_serve_keeps_a_dispatchers_telemetry_when_it_adds_a_store_or_keys() -> None:
    from mrtr.server import generate_key, parse_keys
    from mrtr.serving._stores import with_store
    from mrtr.serving._target import with_keys

    telemetry = ServerTelemetry(tracer_provider=memory_tracing()[0])
    own = Dispatcher(apps.app, telemetry=telemetry)
    assert with_store(own, "memory:").telemetry is telemetry
    assert with_keys(own, parse_keys(generate_key())).telemetry is telemetry
