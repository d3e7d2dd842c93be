"""Transport test harness: request builders, an in-process ASGI client and live servers."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx
import msgspec
import pytest
import uvicorn

from mrtr.http import McpApp
from mrtr.server import Dispatcher
from mrtr.serving._uvicorn import protocol_class
from tests.transports import apps

ROOT = Path(__file__).resolve().parents[2]
VERSION = "2026-07-28"
T = TypeVar("T")
_NAME_FIELD = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: takes seconds (real processes); in the default run, -m 'not slow' skips")


def meta(**extra: object) -> dict[str, object]:
    """A complete per-request `_meta`."""
    return {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
        **extra,
    }


def request(method: str, params: Mapping[str, object] | None = None, *, id: int | str = 1,
            **meta_extra: object) -> dict[str, Any]:
    """A JSON-RPC request with full `_meta` (extra keys go into `_meta`)."""
    return {"jsonrpc": "2.0", "id": id, "method": method,
            "params": {**(params or {}), "_meta": meta(**meta_extra)}}


def call(name: str, arguments: Mapping[str, object] | None = None, *, id: int | str = 1,
         extra_meta: Mapping[str, object] | None = None, **params: object) -> dict[str, Any]:
    """A tools/call request; `params` go beside name/arguments, `extra_meta` into `_meta`."""
    full: dict[str, object] = {"name": name, "arguments": dict(arguments or {}), **params}
    return request("tools/call", full, id=id, **dict(extra_meta or {}))


def headers_for(body: Mapping[str, Any]) -> dict[str, str]:
    """The HTTP headers a conforming client sends with `body`."""
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
        "mcp-method": body["method"],
    }
    field = _NAME_FIELD.get(body["method"])
    if field is not None:
        headers["mcp-name"] = body["params"][field]
    return headers


def post_args(body: Mapping[str, Any], **headers: str) -> dict[str, Any]:
    """Keyword arguments for `client.post("/mcp", ...)`: encoded body plus derived headers."""
    merged = {**headers_for(body), **{k.replace("_", "-"): v for k, v in headers.items()}}
    return {"content": msgspec.json.encode(body), "headers": merged}


def run(coro: Awaitable[T], timeout: float = 20.0) -> T:
    """Run one coroutine to completion, failing instead of hanging."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def asgi_client(app: McpApp | None = None) -> httpx.AsyncClient:
    """An httpx client wired to an McpApp in-process (no sockets)."""
    app = app or McpApp(Dispatcher(apps.app))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                             base_url="http://127.0.0.1:8000")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LiveServer:
    """uvicorn serving any ASGI app on 127.0.0.1 in a background thread.

    `port=0` takes a free port from the OS; `port` and `url` are the real ones once entered.
    `config` overrides uvicorn.Config keywords (http, lifespan, interface, ...); the default
    protocol is `mrtr serve`'s (uvicorn's httptools with Deadlines and the direct path).
    """

    def __init__(self, app: Any, port: int = 0, **config: Any) -> None:
        # `mrtr serve`'s protocol and proxy setting, so its direct path serves these tests.
        options = {"loop": "asyncio", "http": protocol_class("httptools"), "proxy_headers": False,
                   "log_level": "warning", "access_log": False, "lifespan": "on",
                   "timeout_graceful_shutdown": 2, **config}  # uvicorn.Config keywords
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **options))
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    """A real uvicorn serving the test app, with the bound host:port variants allowed."""
    port = free_port()
    hosts = [f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]")]
    app = McpApp(Dispatcher(apps.app), allowed_hosts=hosts, keepalive=0.2)
    with LiveServer(app, port) as server:
        yield server


def cli_env() -> dict[str, str]:
    """Environment for `python -m mrtr.cli` subprocesses run from the checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    env.pop("MRTR_STATE_KEYS", None)
    env.pop("MRTR_STORE", None)
    return env


def spawn_cli(*args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start `python -m mrtr.cli ARGS` in the checkout."""
    kwargs.setdefault("env", cli_env())
    return subprocess.Popen([sys.executable, "-m", "mrtr.cli", *args], cwd=ROOT, **kwargs)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a subprocess we started, then kill it if it lingers."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def wait_ready(url: str, process: subprocess.Popen[bytes], seconds: float = 30.0) -> None:
    """Wait until `mrtr serve` answers server/discover on `url` (fails if it exits first)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "mrtr serve exited early"
        try:
            if httpx.post(url, timeout=2, **post_args(request("server/discover"))).is_success:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("mrtr serve did not become ready")
