"""Tiny ASGI mock servers for client tests, served through httpx.ASGITransport (no sockets)."""

from __future__ import annotations

import json
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from mrtr.client import Client, Handlers
from mrtr.client.transports._http import HTTPTransport

JSONDict = dict[str, Any]
VERSION = "2026-07-28"
META_KEYS = (
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
)


@dataclass
class Reply:
    """What the mock answers: a JSON body, or SSE events (notifications then the response)."""

    body: JSONDict
    status: int = 200
    notifications: list[JSONDict] = field(default_factory=list)


Handler = Callable[[JSONDict, dict[str, str]], Reply]


def ok(request: JSONDict, result: JSONDict) -> Reply:
    return Reply({"jsonrpc": "2.0", "id": request["id"], "result": result})


def fail(
    request: JSONDict, code: int, message: str, data: object = None, status: int = 400
) -> Reply:
    error: JSONDict = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return Reply({"jsonrpc": "2.0", "id": request.get("id"), "error": error}, status=status)


def check_stateless(request: JSONDict, headers: dict[str, str]) -> Reply | None:
    """The stateless mock's checks; None when the request passes."""
    meta = request.get("params", {}).get("_meta", {})
    version = headers.get("mcp-protocol-version")
    if version is None:
        return fail(request, -32020, "missing MCP-Protocol-Version")
    if any(k not in meta for k in META_KEYS):
        return fail(request, -32602, "missing _meta keys")
    if meta[META_KEYS[0]] != version or headers.get("mcp-method") != request["method"]:
        return fail(request, -32020, "header mismatch")
    if version != VERSION:
        return fail(request, -32022, "unsupported", {"supported": [VERSION], "requested": version})
    return None


class MockServer:
    """An ASGI app that records each POST (headers, body) and answers through `handle`."""

    def __init__(self, handle: Handler, *, strict: bool = True) -> None:
        self.handle = handle
        self.strict = strict
        self.seen: list[tuple[dict[str, str], JSONDict]] = []
        self.other_requests: list[str] = []

    def bodies(self, method: str | None = None) -> list[JSONDict]:
        return [b for _, b in self.seen if method is None or b.get("method") == method]

    def headers_of(self, method: str) -> list[dict[str, str]]:
        return [h for h, b in self.seen if b.get("method") == method]

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        if scope["method"] != "POST":
            self.other_requests.append(f"{scope['method']} {scope['path']}")
            await _respond(send, 405, b"", "text/plain")
            return
        chunks = []
        while True:
            event = await receive()
            chunks.append(event.get("body", b""))
            if not event.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        assert headers["accept"] == "application/json, text/event-stream"
        assert headers["content-type"] == "application/json"
        body = json.loads(b"".join(chunks))
        self.seen.append((headers, body))
        reply = (check_stateless(body, headers) if self.strict else None) or self.handle(
            body, headers)
        if reply.notifications:
            events = [*reply.notifications, reply.body]
            data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
            await _respond(send, reply.status, data, "text/event-stream")
        else:
            await _respond(send, reply.status, json.dumps(reply.body).encode(), "application/json")


async def _respond(send: Any, status: int, body: bytes, kind: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind.encode())]})
    await send({"type": "http.response.body", "body": body})


def client_for(app: MockServer, handlers: Handlers | None = None, **options: Any) -> Client:
    """A Client for `app`; these mocks answer no `server/discover`, so no era probe by default."""
    transport = HTTPTransport("http://mock/mcp", transport=httpx.ASGITransport(app=app))
    options.setdefault("mode", "modern")
    return Client(transport, handlers=handlers, **options)
