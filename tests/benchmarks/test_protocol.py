"""benchmarks.protocol runs requests through `mrtr serve`'s real protocol; no timing assertions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from benchmarks import protocol
from mrtr.serving import _direct


@pytest.mark.parametrize("workload", ["call1", "list"])
def test_31_every_request_is_answered_200_through_the_direct_path(
        workload: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cycles: list[str] = []
    for cls in (_direct.DirectCycle, RequestResponseCycle):
        original = cls.run_asgi

        async def run(cycle: Any, app: Any, original: Any = original) -> None:
            cycles.append(type(cycle).__name__)
            await original(cycle, app)

        monkeypatch.setattr(cls, "run_asgi", run)
    assert asyncio.run(protocol.measure(workload, 40, 8, "httptools")) > 0
    assert cycles == ["DirectCycle"] * 40
    cycles.clear()
    assert asyncio.run(protocol.measure(workload, 10, 2, "stock")) > 0  # uvicorn's own
    assert cycles == ["RequestResponseCycle"] * 10


def test_31_a_failing_reply_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = protocol.request_bytes("call1").replace(b"Mcp-Name: echo", b"Mcp-Name: other")
    monkeypatch.setattr(protocol, "request_bytes", lambda workload: raw)  # a 400 each
    with pytest.raises(RuntimeError, match="4 of 4 replies were not 200"):
        asyncio.run(protocol.measure("call1", 4, 2, "httptools"))
