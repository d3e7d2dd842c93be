"""What a plain `mrtr serve` process imports: no module it does not need to serve (issue 31).

RSS after load is a target of `make bench` (≤ 42 MiB); each module below cost a server
memory it never used. A real `mrtr serve` (default SQLite store, opentelemetry-api installed)
answers a two-round tool's first round, which seals a requestState, and then lists its
sys.modules.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.transports.conftest import (
    call,
    cli_env,
    free_port,
    post_args,
    spawn_cli,
    stop,
    wait_ready,
)

APP = '''\
import sys

from mrtr import Context, Form, Server

app = Server("footprint", version="1")


class Name(Form):
    name: str


@app.tool()
def modules() -> str:
    """The modules this process has imported."""
    return " ".join(sorted(sys.modules))


@app.tool()
async def greet(ctx: Context) -> str:
    """Ask a name (round one seals a requestState)."""
    return (await ctx.elicit("Who?", Name, key="name")).name
'''

# Each was imported by a plain serve once, and is not needed to serve over HTTP with the
# SQLite store: WebSockets load on the first upgrade, Redis and PostgreSQL stores on use, the
# client stack and check never. (cryptography stays: it seals every requestState.)
NOT_LOADED = (
    "websockets",
    "uvicorn.protocols.websockets.websockets_sansio_impl",
    "mrtr.stores._redis",
    "mrtr.stores._postgres",
    "httpx",
    "pygments",
    "jsonschema",
    "mrtr.client",
    "mrtr.check",
    "mrtr.auth",
    "tomllib",
    "h11",
)

_UPGRADE = (b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\n\r\n")


def _modules(url: str) -> set[str]:
    reply = httpx.post(url, timeout=10, **post_args(call("modules", id=7)))
    assert reply.status_code == 200, reply.text
    return set(reply.json()["result"]["content"][0]["text"].split())


def _loaded(modules: set[str], name: str) -> bool:
    return name in modules or any(m.startswith(name + ".") for m in modules)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, int]]:
    (tmp_path / "footprint_app.py").write_text(APP)
    port = free_port()
    env = {**cli_env(), "XDG_STATE_HOME": str(tmp_path / "state")}
    server = spawn_cli("serve", f"{tmp_path / 'footprint_app.py'}:app", "--port", str(port),
                       "--log-level", "warning", env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_ready(url, server)
        yield url, port
    finally:
        stop(server)


def test_31_a_plain_serve_loads_none_of_the_modules_it_does_not_need(
        served: tuple[str, int]) -> None:
    url, _ = served
    first = httpx.post(url, timeout=10, **post_args(call("greet")))
    assert "requestState" in first.text, first.text  # sealed: the AEAD ran
    modules = _modules(url)
    assert "cryptography" in modules and "sqlite3" in modules  # the real thing was served
    assert [name for name in NOT_LOADED if _loaded(modules, name)] == []


def test_31_a_websocket_upgrade_loads_the_protocol_and_is_refused_as_before(
        served: tuple[str, int]) -> None:
    url, port = served
    assert not _loaded(_modules(url), "websockets")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_UPGRADE)
        head = sock.recv(4096)
    # McpApp closes a WebSocket before accepting it (1008): uvicorn answers the handshake 403.
    assert head.startswith(b"HTTP/1.1 403"), head
    assert _loaded(_modules(url), "websockets")


def test_31_the_serve_imports_alone_stay_small() -> None:
    # The import side of the same promise, without a server: what `mrtr serve` imports before
    # uvicorn starts (a fresh interpreter, so nothing a test imported counts).
    code = ("import sys, mrtr.cli._serve_cli, mrtr.serving._serve, mrtr.serving._uvicorn\n"
            "print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=cli_env())
    modules = set(out.stdout.split())
    assert [name for name in NOT_LOADED if _loaded(modules, name)] == []
