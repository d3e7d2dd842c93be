"""A misbehaving MCP server (raw ASGI) served by a real uvicorn on 127.0.0.1, for client tests.

The path picks the misbehaviour: /keepalive streams SSE comments forever (on every method, or
only on tools/call with /keepalive-call), /endless-body sends a JSON body that never ends,
/endless-event one SSE event that never ends, /cursor a new `nextCursor` on every page.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn

JSONDict = dict[str, Any]
FOREVER = 60.0  # seconds; a stream stops by itself after this, so no test can leave it running
ADD = {"name": "add", "inputSchema": {"type": "object"}}


class Rogue:
    """The ASGI app; `requests` counts the POSTs by JSON-RPC method."""

    def __init__(self) -> None:
        self.requests: dict[str, int] = {}

    async def __call__(self, scope: JSONDict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        request = json.loads(body)
        method = request["method"]
        self.requests[method] = self.requests.get(method, 0) + 1
        path = scope["path"]
        if path == "/keepalive" or (path == "/keepalive-call" and method == "tools/call"):
            await _stream(send, receive, "text/event-stream", b": keep-alive\n\n", b"")
        elif path == "/endless-body":
            await _stream(send, receive, "application/json", b" " * 65536, b'{"a": ')
        elif path == "/endless-event":
            await _stream(send, receive, "text/event-stream", b"x" * 65536, b"data: ")
        else:
            await _json(send, _plain(request, endless=path == "/cursor"))


def _plain(request: JSONDict, *, endless: bool) -> JSONDict:
    """A tools/list page (with a next one when `endless`), or a tool result."""
    if request["method"] == "tools/list":
        page = int(request["params"].get("cursor") or 0)
        result: JSONDict = {"tools": [{**ADD, "name": f"t{page}"}]}
        if endless:
            result["nextCursor"] = str(page + 1)
    else:
        result = {"content": [{"type": "text", "text": "ok"}]}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


async def _json(send: Any, message: JSONDict) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(message).encode()})


async def _stream(send: Any, receive: Any, kind: str, chunk: bytes, first: bytes) -> None:
    """Send `first`, then `chunk` again and again until the client goes away."""
    gone = asyncio.Event()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    watcher = asyncio.create_task(watch())
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", kind.encode())]})
    await send({"type": "http.response.body", "body": first, "more_body": True})
    deadline = time.monotonic() + FOREVER
    while not gone.is_set() and time.monotonic() < deadline:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await asyncio.sleep(0.01 if len(chunk) < 1000 else 0)
    watcher.cancel()
    await send({"type": "http.response.body", "body": b""})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve(app: Callable[..., Awaitable[None]]) -> Iterator[str]:
    """Run the ASGI `app` under uvicorn on a free 127.0.0.1 port; yield its base URL."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical",
                            lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
