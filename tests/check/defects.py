"""A small raw ASGI MCP server (no mrtr inside) with defects that can be planted one by one.

Clean, it follows every rule `mrtr check` knows: HMAC-signed requestState bound to tool,
arguments and expiry, header and Origin checks, a body limit, 405 on GET, SSE replies with
`X-Accel-Buffering: no`, an error naming 2026-07-28 for a 2025 `initialize`. Each defect breaks
one rule (`late-unverified`, a MAC never checked, breaks the two it defeats: tamper, integrity).
The `book` tool has the TypeScript SDK's shape: round 1 asks without a state,
round 2 mints the first requestState, round 3 books (and counts the booking: `effects`). The
PROFILE_DEFECTS break one client profile each. Also runnable over stdio:
`python -m tests.check.defects --stdio DEFECT...`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import sys
import time
from typing import Any

DEFECTS = ("connection-keyed", "unsigned", "unbound-args", "no-result-type", "buffered-sse",
           "push", "late-plain-state", "late-unverified", "process-key", "open-get")
PROFILE_DEFECTS = ("needs-probe", "cancel-crash", "strict-accept")
VERSION = "2026-07-28"
_KEY = hashlib.sha256(b"tests.check.defects").digest()  # fixed: stdio children share it
_LIMIT = 1024 * 1024
_TOOLS = [
    {"name": "ask", "description": "Greets a user it asks for.",
     "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]}},
    {"name": "echo", "description": "Echoes text.",
     "inputSchema": {"type": "object",
                     "properties": {"text": {"type": "string", "x-mcp-header": "Text"}},
                     "required": ["text"]}},
    {"name": "book", "description": "Books boxes, asking how many, then for confirmation.",
     "inputSchema": {"type": "object", "properties": {"item": {"type": "string"}},
                     "required": ["item"]}},
    {"name": "effects", "description": "How many bookings were made (read-only).",
     "inputSchema": {"type": "object", "properties": {}}},
]


def _form(key: str, prop: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {key: {"method": "elicitation/create", "params": {
        "mode": "form", "message": f"{prop}?",
        "requestedSchema": {"type": "object", "properties": {prop: schema}, "required": [prop]}}}}
_ASK = {"name": {"method": "elicitation/create", "params": {
    "mode": "form", "message": "Your name?",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                        "required": ["name"]}}}}


class Rejected(Exception):
    def __init__(self, code: int, message: str, status: int = 200) -> None:
        super().__init__(message)
        self.code, self.status = code, status


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Server:
    """The protocol part, shared by the HTTP and stdio fronts."""

    def __init__(self, defects: set[str], ttl: float = 60.0, once: bool = False) -> None:
        unknown = defects - set(DEFECTS) - set(PROFILE_DEFECTS)
        assert not unknown, unknown
        self.defects, self.ttl, self.once = defects, ttl, once
        self.by_connection: dict[object, dict[str, Any]] = {}
        self.calls = 0  # tools/call requests that reached a tool
        self.bookings = 0  # the effect `effects` reports
        self.outcomes: dict[str, dict[str, Any]] = {}  # once=True: final state -> result
        self.probed: set[object] = set()  # connections that sent server/discover
        self.key = secrets.token_bytes(32) if "process-key" in defects else _KEY

    def seal(self, claims: dict[str, Any], connection: object, plain: bool = False) -> str:
        if "connection-keyed" in self.defects:
            handle = secrets.token_hex(8)
            self.by_connection[(connection, handle)] = claims
            return handle
        body = json.dumps(claims, separators=(",", ":")).encode()
        if "unsigned" in self.defects or plain:
            return _b64(body)
        mac = hmac.new(self.key, body, hashlib.sha256).digest()
        return f"{_b64(body)}.{_b64(mac)}"

    def open(self, state: str, connection: object, name: object = None) -> dict[str, Any]:
        if "connection-keyed" in self.defects:
            claims = self.by_connection.get((connection, state))
            if claims is None:
                raise Rejected(-32602, "unknown requestState")
            return claims
        try:
            if "unsigned" in self.defects or (
                    name == "book" and "late-plain-state" in self.defects):
                return dict(json.loads(_unb64(state)))
            body, mac = state.split(".")
            raw = _unb64(body)
            if name == "book" and "late-unverified" in self.defects:
                return dict(json.loads(raw))
            if not hmac.compare_digest(hmac.new(self.key, raw, hashlib.sha256).digest(),
                                       _unb64(mac)):
                raise ValueError("bad mac")
            return dict(json.loads(raw))
        except (ValueError, TypeError) as exc:
            raise Rejected(-32602, "invalid requestState") from exc

    def handle(self, message: dict[str, Any], connection: object) -> dict[str, Any]:
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            raise Rejected(-32602, "Unsupported protocol version", 400)
        if method == "server/discover":
            self.probed.add(connection)
            return {"supportedVersions": [VERSION], "capabilities": {"tools": {}}}
        if "needs-probe" in self.defects and connection not in self.probed:
            raise Rejected(-32600, "send server/discover first on this connection", 400)
        if method == "tools/list":
            return {"tools": _TOOLS}
        if method == "tools/call":
            return self.call(params, connection)
        raise Rejected(-32601, f"Method not found: {method}", 404)

    def call(self, params: dict[str, Any], connection: object) -> dict[str, Any]:
        name, args = params.get("name"), params.get("arguments") or {}
        if name not in ("ask", "echo", "book", "effects"):
            raise Rejected(-32602, f"Unknown tool: {name}")
        self.calls += 1
        if name == "effects":
            return {"content": [{"type": "text", "text": f"{self.bookings} bookings"}],
                    "structuredContent": {"bookings": self.bookings}}
        state = params.get("requestState")
        claims: dict[str, Any] = {}
        if isinstance(state, str):
            claims = self.open(state, connection, name)
            bound = claims.get("tool") == name and (
                "unbound-args" in self.defects or claims.get("args") == args)
            if not bound or claims.get("exp", 0) < time.time():
                raise Rejected(-32602, "requestState does not match")
        if name == "echo":
            return {"content": [{"type": "text", "text": str(args.get("text"))}]}
        if name == "book":
            return self.book(params, args, claims, state, connection)
        answer = (params.get("inputResponses") or {}).get("name")
        if isinstance(answer, dict) and answer.get("action") != "accept" and (
                "cancel-crash" in self.defects):
            raise Rejected(-32603, "Internal error: form was not filled")
        if isinstance(state, str) and isinstance(answer, dict) and answer.get("action") == "accept":
            who = (answer.get("content") or {}).get("name")
            return {"content": [{"type": "text", "text": f"Hello {who} from {args.get('city')}"}]}
        claims = {"tool": name, "args": args, "exp": time.time() + self.ttl}
        return {"resultType": "input_required", "inputRequests": _ASK,
                "requestState": self.seal(claims, connection)}

    def book(self, params: dict[str, Any], args: dict[str, Any], claims: dict[str, Any],
             state: object, connection: object) -> dict[str, Any]:
        answers = params.get("inputResponses") or {}
        if not isinstance(state, str):
            boxes = ((answers.get("boxes") or {}).get("content") or {}).get("boxes")
            if not isinstance(boxes, int):  # round 1: ask, no state yet (the TS SDK shape)
                return {"resultType": "input_required", "inputRequests": _form(
                    "boxes", "boxes", {"type": "integer", "minimum": 1, "maximum": 10})}
            plain = "late-plain-state" in self.defects
            sealed = self.seal({"tool": "book", "args": args, "boxes": boxes,
                                "exp": time.time() + self.ttl}, connection, plain=plain)
            return {"resultType": "input_required", "requestState": sealed,
                    "inputRequests": _form("confirm", "confirm", {"type": "boolean"})}
        if self.once and state in self.outcomes:
            return self.outcomes[state]
        self.bookings += 1
        done = {"content": [{"type": "text", "text": f"Booked {claims.get('boxes')} boxes"}]}
        self.outcomes[state] = done
        return done

    def reply(self, message: dict[str, Any], connection: object) -> dict[str, Any]:
        rid = message.get("id")
        try:
            result = self.handle(message, connection)
        except Rejected as exc:
            error = {"code": exc.code, "message": str(exc)}
            if message.get("method") == "initialize":
                error["data"] = {"supported": [VERSION]}
            return {"jsonrpc": "2.0", "id": rid, "error": error}
        if "no-result-type" not in self.defects or "resultType" in result:
            result = {"resultType": "complete", **result}
        return {"jsonrpc": "2.0", "id": rid, "result": result}


class App:
    """The Streamable HTTP front (raw ASGI)."""

    def __init__(self, *defects: str, ttl: float = 60.0, once: bool = False) -> None:
        self.server = Server(set(defects), ttl, once)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if scope["method"] == "GET" and "open-get" in self.server.defects:
            return await _hold_open(receive, send)
        refused = self.refuse(scope["method"], headers)
        if refused:
            return await _send(send, refused, b"", "text/plain")
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if len(body) > _LIMIT:
                return await _send(send, 413, b"", "text/plain")
            if not event.get("more_body"):
                break
        message = json.loads(body)
        status = self.check_headers(message, headers)
        if status:
            error = {"jsonrpc": "2.0", "id": message.get("id"),
                     "error": {"code": -32020, "message": "Header mismatch"}}
            return await _send(send, 400, json.dumps(error).encode())
        reply = self.server.reply(message, scope["client"])
        if message.get("method") == "tools/call":
            return await self.stream(send, reply)
        code = 404 if reply.get("error", {}).get("code") == -32601 else 200
        code = 400 if message.get("method") == "initialize" else code
        await _send(send, code, json.dumps(reply).encode())

    def refuse(self, verb: str, headers: dict[str, str]) -> int:
        """The status refusing this request before its body is read, or 0."""
        if verb != "POST":
            return 405
        if "strict-accept" in self.server.defects and (
                "text/event-stream" not in headers.get("accept", "")):
            return 406
        origin = headers.get("origin")
        foreign = origin and not origin.startswith(("http://127.0.0.1", "http://localhost"))
        local = headers.get("host", "").startswith(("127.0.0.1:", "localhost:"))
        return 403 if foreign or not local else 0

    @staticmethod
    def check_headers(message: dict[str, Any], headers: dict[str, str]) -> bool:
        if message.get("method") == "initialize":
            return False
        method = message.get("method")
        params = message.get("params") or {}
        name = params.get("name")
        text = (params.get("arguments") or {}).get("text")
        if name == "echo" and text is not None and headers.get("mcp-param-text") != text:
            return True
        return (headers.get("mcp-protocol-version") != VERSION
                or headers.get("mcp-method") != method
                or (method == "tools/call" and headers.get("mcp-name") != name))

    async def stream(self, send: Any, reply: dict[str, Any]) -> None:
        extra = [] if "buffered-sse" in self.server.defects else [(b"x-accel-buffering", b"no")]
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), *extra]})
        events = []
        if "push" in self.server.defects:
            events.append({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"})
        events.append(reply)
        data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
        await send({"type": "http.response.body", "body": data})


async def _hold_open(receive: Any, send: Any) -> None:
    """An event stream that never ends (a stateless SDK holding GET open)."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b": open\n\n", "more_body": True})
    while (await receive())["type"] != "http.disconnect":
        pass


async def _send(send: Any, status: int, body: bytes, kind: str = "application/json") -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind.encode())]})
    await send({"type": "http.response.body", "body": body})


def stdio(defects: list[str]) -> None:
    """Newline-delimited JSON-RPC on stdin/stdout; one connection per process."""
    server = Server(set(defects))
    for line in sys.stdin:
        message = json.loads(line)
        reply = server.reply(message, "stdio")
        if "push" in server.defects and message.get("method") == "tools/call":
            print(json.dumps({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"}))
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    assert sys.argv[1:2] == ["--stdio"], "usage: python -m tests.check.defects --stdio DEFECT..."
    stdio(sys.argv[2:])
