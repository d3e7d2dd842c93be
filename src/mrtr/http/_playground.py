"""The playground: a page at the root of a development server that drives flows in the browser.

`McpApp(..., playground=True)` (what `mrtr dev` sets) serves `GET /` and `/_playground/*`: the
static page (mrtr/http/playground/, shipped in the wheel), under a strict CSP, and three
dev-only JSON helpers the page calls on the same origin. The page itself is an MCP client: it
POSTs to the MCP endpoint like any other client (docs/playground.md).
"""

# Design: the page must show whether a re-sent round ran again or came from the store, which no
# wire field says. The Dispatcher's Probe knows it (`store_hit`, the request line's "replayed"),
# so the playground swaps the Dispatcher's RequestLog for a Witness that, besides writing the
# usual line, files each request's round, flow and replay flag under the trace id the page sends
# in `Mcp-Playground-Trace` (a ContextVar set for that HTTP request; every round of a 2025
# session's call runs in its task). The page then asks `/_playground/trace?id=...`. Only a
# playground app has a Witness: the hot path of every other app is untouched. Served only to a
# loopback bind (the ASGI `server` address) unless `playground="force"`; Host/Origin checks
# apply as to the endpoint. Answer validation reuses the server's own checker, so the page's
# inline errors are the server's rules and sentences.
from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextvars import ContextVar
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qs

from mrtr.errors import ProtocolError
from mrtr.protocol._loopback import is_loopback
from mrtr.server._failures import bad_request, not_found, too_large
from mrtr.server._probe import Probe
from mrtr.server._request_log import RequestLog
from mrtr.server._schema_check import FormInvalid, validate_against_schema

if TYPE_CHECKING:
    from mrtr.http._app import McpApp
    from mrtr.http._exchange import Exchange

__all__ = ["CSP", "Playground", "PlaygroundMode", "TRACE_HEADER", "asset", "loopback_bind"]

PlaygroundMode = bool | Literal["force"]
TRACE_HEADER = "mcp-playground-trace"
_TRACE_NAME = TRACE_HEADER.encode()
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
_ASSETS = {"/": ("index.html", "text/html; charset=utf-8"),
           "/_playground/app.js": ("app.js", "text/javascript; charset=utf-8"),
           "/_playground/app.css": ("app.css", "text/css; charset=utf-8")}
_KEPT_TRACES = 1000  # traces remembered (oldest dropped): the page asks right after each round
_MAX_BODY = 256 * 1024
_TRACE: ContextVar[list[dict[str, object]] | None] = ContextVar("mrtr_playground_trace",
                                                                default=None)

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
Receive = Callable[[], Awaitable[Message]]


def asset(name: str) -> bytes:
    """One static file of the page (index.html, app.js, app.css), from the installed package."""
    return resources.files("mrtr.http.playground").joinpath(name).read_bytes()


def loopback_bind(scope: Mapping[str, Any]) -> bool:
    """Whether the socket serving `scope` is bound to a loopback address (or a Unix socket)."""
    server = scope.get("server")
    if not server:
        return True  # a Unix socket or an in-process ASGI call: not reachable from a network
    return is_loopback(str(server[0]))


class Witness(RequestLog):
    """The Dispatcher's RequestLog under a playground: also files each request's round."""

    __slots__ = ("inner",)

    def __init__(self, inner: RequestLog) -> None:
        super().__init__(inner.logger)
        self.inner = inner

    def start(self) -> float | None:
        return time.perf_counter()  # always: the trace wants every request

    def write(self, probe: Probe, started: float, result: object,
              error: ProtocolError | None) -> None:
        trace = _TRACE.get()
        if trace is not None:
            trace.append({"method": probe.method, "round": probe.round,
                          "flow": probe.flow_id, "replayed": probe.store_hit,
                          "ms": round((time.perf_counter() - started) * 1000.0, 3)})
        if self.inner.start() is not None:
            self.inner.write(probe, started, result, error)


class Playground:
    """What `McpApp(playground=...)` adds: the page, its helpers, and the round Witness."""

    def __init__(self, app: McpApp, mode: PlaygroundMode) -> None:
        self.app = app
        self.force = mode == "force"
        self.traces: OrderedDict[str, list[dict[str, object]]] = OrderedDict()

    def owns(self, path: str) -> bool:
        """Whether `path` is the playground's (the endpoint never is)."""
        return path != self.app.path and (path == "/" or path.startswith("/_playground/"))

    def refused(self, scope: Mapping[str, Any]) -> bool:
        """A bind off loopback without `playground="force"`: the page does not exist there."""
        return not self.force and not loopback_bind(scope)

    async def intercept(self, scope: Mapping[str, Any], exchange: Exchange) -> bool:
        """Serve a path of the page (Host/Origin checked already): True when it was one."""
        if not self.owns(scope.get("path", "")):
            return False
        if self.refused(scope):
            raise not_found(self.app.path)
        await self.answer(scope, exchange.receive, exchange.send)
        exchange.started = True
        return True

    def watch(self, scope: Mapping[str, Any]) -> None:
        """Before a request: file its rounds under the page's trace id, if it sent one."""
        dispatcher = self.app.dispatcher
        if not isinstance(dispatcher.request_log, Witness):  # a replaced Dispatcher: again
            dispatcher.request_log = Witness(dispatcher.request_log)
        raw = next((value for name, value in scope.get("headers", ())
                    if name.lower() == _TRACE_NAME), b"")
        trace = raw.decode("latin-1")
        if not trace or len(trace) > 64 or not trace.isascii() or not trace.isprintable():
            return
        rounds: list[dict[str, object]] = []
        self.traces[trace] = rounds
        while len(self.traces) > _KEPT_TRACES:
            self.traces.popitem(last=False)
        _TRACE.set(rounds)  # this HTTP request's task only

    async def answer(self, scope: Mapping[str, Any], receive: Receive, send: Send) -> None:
        """Serve one playground path (Host/Origin already checked); 404 for anything else."""
        path, method = scope.get("path", ""), scope.get("method", "")
        if path in _ASSETS and method in ("GET", "HEAD"):
            name, media = _ASSETS[path]
            await _respond(send, 200, asset(name), media)
        elif path == "/_playground/info" and method == "GET":
            await _respond(send, 200, self._info())
        elif path == "/_playground/trace" and method == "GET":
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            rounds = self.traces.get((query.get("id") or [""])[0])
            await _respond(send, 200, json.dumps({"known": rounds is not None,
                                                  "rounds": rounds or []}).encode())
        elif path == "/_playground/validate" and method == "POST":
            await _respond(send, 200, await self._validate(receive))
        else:
            raise not_found(self.app.path)  # a Refusal, written by McpApp

    def _info(self) -> bytes:
        dispatcher = self.app.dispatcher
        server = dispatcher.server
        store = dispatcher.store
        return json.dumps({
            "endpoint": self.app.path, "server": server.name, "version": server.version,
            "store": type(store).__name__ if store is not None else None,
            "sessions": self.app.sessions is not None,
            "traceHeader": TRACE_HEADER,
        }).encode()

    async def _validate(self, receive: Receive) -> bytes:
        """`{"schema", "content"}` → `{"problems": {field: sentence}}` by the server's rules."""
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > _MAX_BODY:
                raise too_large(_MAX_BODY)
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                break
        try:
            asked = json.loads(body)
            schema, content = asked["schema"], asked["content"]
            if not isinstance(schema, dict) or not isinstance(content, dict):
                raise TypeError("schema and content must be objects")
            validate_against_schema(schema, content)
        except FormInvalid as exc:
            return json.dumps({"problems": exc.problems}).encode()
        except Exception as exc:  # not JSON, not objects, a schema jsonschema refuses
            raise bad_request(f"cannot validate: {type(exc).__name__}: {exc}") from None
        return b'{"problems": {}}'


async def _respond(send: Send, status: int, body: bytes,
                   media: str = "application/json") -> None:
    headers = [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode()),
               (b"content-security-policy", CSP.encode()), (b"cache-control", b"no-store"),
               (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
