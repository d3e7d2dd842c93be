"""Shadows the real package for the `mrtr-nootel` benchmark target: OpenTelemetry not importable.

benchmarks/run.py puts benchmarks/no_otel first on that target's PYTHONPATH, so the server runs
exactly as if `mrtr[otel]` were not installed.
"""

raise ImportError("opentelemetry is hidden for the mrtr-nootel benchmark target")
