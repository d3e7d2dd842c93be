"""The consent decision as a span attribute (#29): `mrtr.consent` on the request's span."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind  # noqa: E402

from mrtr.protocol import ToolAnnotations  # noqa: E402
from mrtr.server import Context, Dispatcher, Peer, Server, ServerTelemetry  # noqa: E402

app = Server("consent-span")


@app.tool(annotations=ToolAnnotations(destructive_hint=True))
async def drop(ctx: Context, table: str) -> str:
    return "dropped" if await ctx.confirm(f"Drop {table}?") else "kept"


def test_a_redeemed_token_and_a_refused_replay_are_span_attributes() -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    dispatcher = Dispatcher(app, telemetry=ServerTelemetry(tracer_provider=provider))

    def call(arguments: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "drop", "arguments": arguments,
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}}
        reply = asyncio.run(dispatcher.handle_bytes(msgspec.json.encode(body), Peer()))
        assert reply is not None
        result: dict[str, Any] = msgspec.json.decode(reply.body)["result"]
        return result

    token = call({"table": "t"})["_meta"]["io.github.mrtr/consent"]["token"]
    assert call({"table": "t", "_confirm": token})["content"][0]["text"] == "dropped"
    assert call({"table": "t", "_confirm": token})["isError"] is True
    server = [s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert [(s.attributes or {}).get("mrtr.consent") for s in server] == [
        None, "token", "refused"]
