"""A scripted MCP 2025 (initialize + Mcp-Session-Id) Streamable HTTP server, as an ASGI app."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

JSONDict = dict[str, Any]


@dataclass
class Seen:
    verb: str
    headers: dict[str, str]
    body: JSONDict = field(default_factory=dict)


class SessionMock:
    """Like the official SDKs' session mode: 400 without a session id, 404 for an unknown one.

    Tools: `ask` sends `ping` then `elicitation/create` on the POST's SSE stream and returns the
    answer's content as text; `resume` primes its SSE stream (`retry`) and drops it, then serves
    the result on the GET that resumes it; anything else returns "ok".
    """

    def __init__(self, version: str = "2025-11-25", retry_ms: int = 100,
                 id_on_400: bool = False, get_status: int = 405) -> None:
        self.get_status = get_status  # the answer to a GET that resumes nothing
        self.version = version
        self.id_on_400 = id_on_400  # as mcp 1.x does: a fresh id on the 400 (never valid)
        self.retry_ms = retry_ms
        self.seen: list[Seen] = []
        self.sessions: set[str] = set()
        self.answers: dict[object, asyncio.Future[JSONDict]] = {}
        self.parked: dict[str, JSONDict] = {}  # event id -> response to serve on resume
        self._count = 0

    def methods(self) -> list[str]:
        return [f"{s.verb} {s.body.get('method', '')}".strip() for s in self.seen]

    def expire(self) -> None:
        self.sessions.clear()

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        body = await _body(receive)
        message: JSONDict = json.loads(body) if body else {}
        self.seen.append(Seen(scope["method"], headers, message))
        session = headers.get("mcp-session-id")
        if scope["method"] == "DELETE":
            self.sessions.discard(session or "")
            return await _send(send, 200, b"", "text/plain")
        if scope["method"] == "GET":
            return await self._get(headers, send)
        if message.get("method") == "initialize":
            return await self._initialize(message, send)
        if session is None:
            error = {"jsonrpc": "2.0", "id": "server-error",
                     "error": {"code": -32600, "message": "Bad Request: Missing session ID"}}
            extra = [(b"mcp-session-id", b"never-valid")] if self.id_on_400 else []
            return await _send(send, 400, json.dumps(error).encode(), "application/json", extra)
        if session not in self.sessions:
            return await _send(send, 404, b'{"error": "session not found"}', "application/json")
        if "method" not in message:  # a response to one of our requests
            self.answers.setdefault(message["id"], _future()).set_result(message)
            return await _send(send, 202, b"", "text/plain")
        if "id" not in message:
            return await _send(send, 202, b"", "text/plain")
        await self._request(message, send)

    async def _initialize(self, message: JSONDict, send: Any) -> None:
        self._count += 1
        session = f"session-{self._count}"
        self.sessions.add(session)
        result = {"protocolVersion": self.version, "capabilities": {"tools": {}},
                  "serverInfo": {"name": "mock-2025", "version": "1.0"}, "instructions": "hi"}
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        await _send(send, 200, json.dumps(reply).encode(), "application/json",
                    [(b"mcp-session-id", session.encode())])

    async def _request(self, message: JSONDict, send: Any) -> None:
        method, rid = message["method"], message["id"]
        if method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("ask", "resume")]
            return await _json(send, {"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        if method != "tools/call":
            error = {"code": -32601, "message": f"Method not found: {method}"}
            return await _json(send, {"jsonrpc": "2.0", "id": rid, "error": error})
        name = message["params"]["name"]
        if name == "resume":
            self.parked["ev-1"] = _text(rid, "resumed")
            prime = f"id: ev-1\nretry: {self.retry_ms}\ndata: \n\n".encode()
            return await _send(send, 200, prime, "text/event-stream")
        if name != "ask":
            return await _json(send, _text(rid, "ok"))
        await _start(send)
        for asked in ({"jsonrpc": "2.0", "id": "p1", "method": "ping"},
                      {"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": {
                          "message": "Name?", "requestedSchema": {
                              "type": "object", "properties": {"name": {"type": "string"}}}}}):
            await _event(send, asked)
            answer = await asyncio.wait_for(self.answers.setdefault(asked["id"], _future()), 5)
        result = answer.get("result", {})
        text = json.dumps(result.get("content") if "result" in answer else answer["error"])
        await _event(send, _text(rid, text), more=False)

    async def _get(self, headers: dict[str, str], send: Any) -> None:
        parked = self.parked.pop(headers.get("last-event-id", ""), None)
        if parked is None:
            return await _send(send, self.get_status, b"", "text/plain")
        await _start(send)
        await _event(send, parked, more=False)


def _text(rid: object, text: str) -> JSONDict:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


def _future() -> asyncio.Future[JSONDict]:
    return asyncio.get_running_loop().create_future()


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        event = await receive()
        chunks.append(event.get("body", b""))
        if not event.get("more_body"):
            return b"".join(chunks)


async def _send(send: Any, status: int, body: bytes, kind: str,
                extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind.encode()), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


async def _json(send: Any, message: JSONDict) -> None:
    await _send(send, 200, json.dumps(message).encode(), "application/json")


async def _start(send: Any) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})


async def _event(send: Any, message: JSONDict, *, more: bool = True) -> None:
    data = b"data: " + json.dumps(message).encode() + b"\n\n"
    await send({"type": "http.response.body", "body": data, "more_body": more})
