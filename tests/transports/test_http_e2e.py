"""McpApp behind a real uvicorn (httptools) on 127.0.0.1, driven by a real httpx client."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec
import pytest

from mrtr.protocol import SSEParser
from tests.transports.conftest import LiveServer, call, post_args, request, run

TIMEOUT = httpx.Timeout(10.0)


def post(live: LiveServer, body: dict[str, Any], **headers: str) -> httpx.Response:
    with httpx.Client(base_url=live.url, timeout=TIMEOUT) as client:
        return client.post("/mcp", **post_args(body, **headers))


async def raw_exchange(live: LiveServer, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    """Send raw bytes (a request head plus some body); return the status and response bytes."""
    port = urlsplit(live.url).port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + body)
        await writer.drain()
        data = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"content-length: *(\d+)", data, re.IGNORECASE)
        data += await reader.readexactly(int(length[1]) if length else 0)
    finally:
        writer.close()
    return int(data.split(b" ", 2)[1]), data


def head(live: LiveServer, length: int, *extra: bytes) -> bytes:
    host = urlsplit(live.url).netloc.encode()
    lines = [b"POST /mcp HTTP/1.1", b"Host: " + host, b"Content-Type: application/json",
             b"Content-Length: %d" % length, *extra]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def test_discover_over_the_network(live: LiveServer) -> None:
    response = post(live, request("server/discover"))
    assert response.status_code == 200
    assert response.json()["result"]["resultType"] == "complete"
    assert "mcp-session-id" not in response.headers


def test_dns_rebinding_hostile_host_is_4xx_and_own_host_2xx(live: LiveServer) -> None:
    own = urlsplit(live.url).netloc
    hostile = post(live, request("server/discover"), host="evil.example.com",
                   origin="http://evil.example.com")
    assert 400 <= hostile.status_code < 500
    friendly = post(live, request("server/discover"), host=own, origin=f"http://{own}")
    assert 200 <= friendly.status_code < 300


def test_three_concurrent_streams(live: LiveServer) -> None:
    async def go() -> list[int]:
        async with httpx.AsyncClient(base_url=live.url, timeout=TIMEOUT) as client:
            posts = [client.post("/mcp", **post_args(request("tools/list", id=i),
                                                     accept="text/event-stream, application/json"))
                     for i in range(3)]
            return [r.status_code for r in await asyncio.gather(*posts)]

    assert run(go()) == [200, 200, 200]


@pytest.mark.parametrize(("content", "status", "code"), [
    (b"{oops", 400, -32700),
    (b"[1, 2]", 400, -32600),
    (msgspec.json.encode(request("unknown/method")), 404, -32601),
])
def test_bad_bodies(live: LiveServer, content: bytes, status: int, code: int) -> None:
    with httpx.Client(base_url=live.url, timeout=TIMEOUT) as client:
        response = client.post("/mcp", content=content,
                               headers={"content-type": "application/json",
                                        "mcp-protocol-version": "2026-07-28",
                                        "mcp-method": "unknown/method"})
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


def test_get_is_405_and_wrong_type_415(live: LiveServer) -> None:
    with httpx.Client(base_url=live.url, timeout=TIMEOUT) as client:
        assert client.get("/mcp").status_code == 405
        assert client.post("/mcp", content=b"{}", headers={"content-type": "text/plain"}
                           ).status_code == 415


def test_fifty_mebibytes_is_413_without_reading_it(live: LiveServer) -> None:
    size = 50 * 1024 * 1024
    status, _ = run(raw_exchange(live, head(live, size), b"{" * 1024), timeout=10)
    assert status == 413


def test_garbage_header_bytes_are_400(live: LiveServer) -> None:
    body = msgspec.json.encode(request("tools/list"))
    status, data = run(raw_exchange(live, head(live, len(body), b"X-Junk: \xff\xfe\x80"), body))
    assert status == 400
    assert b'"code":-32600' in data


def test_progress_arrives_as_it_happens(live: LiveServer) -> None:
    body = call("count", {"steps": 3, "delay": 0.3}, id="live", extra_meta={"progressToken": 1})

    async def go() -> list[tuple[float, dict[str, Any]]]:
        seen: list[tuple[float, dict[str, Any]]] = []
        parser = SSEParser()
        async with httpx.AsyncClient(base_url=live.url, timeout=TIMEOUT) as client:
            async with client.stream("POST", "/mcp", **post_args(body)) as response:
                assert response.headers["content-type"] == "text/event-stream"
                assert response.headers["x-accel-buffering"] == "no"
                async for chunk in response.aiter_bytes():
                    seen += [(time.monotonic(), json.loads(e.data)) for e in parser.feed(chunk)]
        return seen

    seen = run(go())
    kinds = [m.get("method", "result") for _, m in seen]
    assert kinds == ["notifications/progress"] * 3 + ["result"]
    assert seen[-1][1]["result"]["content"][0]["text"] == "counted 3"
    assert seen[-1][0] - seen[0][0] > 0.5  # streamed, not buffered until the end


def test_disconnect_mid_stream_cancels_the_handler(live: LiveServer, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    body = call("hang", {"marker": str(marker)}, extra_meta={"progressToken": "t"})

    async def go() -> None:
        parser = SSEParser()
        async with httpx.AsyncClient(base_url=live.url, timeout=TIMEOUT) as client:
            async with client.stream("POST", "/mcp", **post_args(body)) as response:
                async for chunk in response.aiter_bytes():
                    if parser.feed(chunk):
                        break  # got the progress event: hang up mid-stream
        for _ in range(100):
            if marker.exists():
                return
            await asyncio.sleep(0.05)

    run(go())
    assert marker.read_text() == "cancelled"


def test_three_round_flow_on_one_server(live: LiveServer) -> None:
    answers = [{"name": {"action": "accept", "content": {"name": "Ada"}}},
               {"color": {"action": "accept", "content": {"color": "green"}}}]
    params: dict[str, Any] = {}
    for round_no in range(3):
        result = post(live, call("greet", id=round_no, **params)).json()["result"]
        if round_no < 2:
            assert result["resultType"] == "input_required"
            params = {"inputResponses": answers[round_no], "requestState": result["requestState"]}
    assert result["content"][0]["text"] == "Hello Ada, you like green"
