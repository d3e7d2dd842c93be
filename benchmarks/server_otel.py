"""benchmarks.server with the OpenTelemetry SDK configured: the `mrtr-otel-sdk` target.

Spans go through a BatchSpanProcessor to an exporter that encodes each batch as an OTLP export
request (the CPU an OTLP exporter spends) and drops it instead of sending it; metrics are
collected by a periodic reader the same way. Serve it with
`mrtr serve benchmarks.server_otel:app --port 9000`.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import metrics, trace
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from benchmarks.server import app

__all__ = ["app"]


class EncodingSpanExporter(SpanExporter):
    """Encodes each batch as OTLP protobuf, then drops it (no collector in the benchmark)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        encode_spans(spans).SerializeToString()
        return SpanExportResult.SUCCESS


class EncodingMetricExporter(MetricExporter):
    """Encodes each collection as OTLP protobuf, then drops it."""

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: object) -> MetricExportResult:
        encode_metrics(metrics_data).SerializeToString()
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        pass


_tracing = TracerProvider()
_tracing.add_span_processor(BatchSpanProcessor(EncodingSpanExporter()))
trace.set_tracer_provider(_tracing)
metrics.set_meter_provider(MeterProvider(metric_readers=[
    PeriodicExportingMetricReader(EncodingMetricExporter(), export_interval_millis=5_000)]))
