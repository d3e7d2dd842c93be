"""A request McpApp refuses leaves no reference cycle behind (issue 31).

As tests/server/test_reference_cycles.py for the HTTP layer: a Refusal (here 415) raised while
the body is held, and a body the decoder refuses, answered by McpApp itself. Each counts what a
full collection finds after five such requests, the collector off meanwhile: nothing.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import MutableMapping
from typing import Any

import pytest

from benchmarks.server import app
from mrtr.http import McpApp
from mrtr.server import Dispatcher

BODY = b"{" + b"x" * 100_000  # not JSON


async def post(mcp: McpApp, content_type: bytes) -> int:
    """One POST of BODY through McpApp's ASGI interface; the status it answered. By hand, not
    through conftest's asgi_client: httpx's ASGITransport leaves cyclic garbage of its own."""
    scope = {"type": "http", "method": "POST", "path": "/mcp", "http_version": "1.1",
             "scheme": "http", "query_string": b"", "root_path": "",
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", content_type),
                         (b"accept", b"application/json, text/event-stream"),
                         (b"content-length", str(len(BODY)).encode())]}
    statuses: list[int] = []
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    await mcp(scope, receive, send)
    return statuses[0]


@pytest.mark.parametrize(("content_type", "status"), [(b"text/plain", 415),
                                                      (b"application/json", 400)])
def test_31_a_refused_request_is_freed_without_the_collector(content_type: bytes,
                                                              status: int) -> None:
    async def measure() -> int:
        mcp = McpApp(Dispatcher(app))
        assert await post(mcp, content_type) == status  # caches filled on first use
        gc.collect()
        gc.disable()
        try:
            for _ in range(5):
                assert await post(mcp, content_type) == status
            return gc.collect()
        finally:
            gc.enable()

    assert asyncio.run(measure()) == 0
