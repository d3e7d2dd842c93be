"""Server.run() and Server.http_app() (#18): served as `mrtr serve` serves, keys from the env."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from mrtr import Context, Server
from mrtr.http import McpApp
from mrtr.server import Dispatcher, generate_key
from mrtr.serving._launch import http_app, locate, run
from mrtr.stores import MemoryStore
from tests.transports.conftest import ROOT, call, cli_env, free_port, post_args, stop, wait_ready

app = Server("launch-tests", version="1")


@app.tool()
async def sure(ctx: Context) -> str:
    """Ask once, then answer."""
    return "yes" if await ctx.confirm("Sure?", key="sure") else "no"


def post(mcp: McpApp, body: dict[str, Any], url: str = "http://127.0.0.1/mcp",
         **scope: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        transport = httpx.ASGITransport(app=mcp, root_path=scope.get("root_path", ""))
        async with httpx.AsyncClient(transport=transport) as client:
            reply = await client.post(url, **post_args(body))
            result: dict[str, Any] = reply.json()
            return result

    return asyncio.run(go())


def test_18_http_app_seals_with_the_keys_in_the_environment() -> None:
    env = {"MRTR_STATE_KEYS": generate_key()}
    first, second = http_app(app, environ=env), app.http_app()  # the second: another key
    asked = post(first, call("sure"))["result"]
    retry = call("sure", requestState=asked["requestState"],
                 inputResponses={"sure": {"action": "accept", "content": {"confirm": True}}})
    same_keys = http_app(app, environ=env)
    assert post(same_keys, retry)["result"]["content"][0]["text"] == "yes"
    assert post(second, retry)["error"]["code"] == -32602
    assert isinstance(first.dispatcher.store, MemoryStore)  # exactly-once in this process


def test_18_http_app_takes_its_store_from_the_environment(tmp_path: Path) -> None:
    mcp = http_app(app, environ={"MRTR_STORE": f"sqlite://{tmp_path / 's.db'}"})
    assert type(mcp.dispatcher.store).__name__ == "SQLiteStore"
    with pytest.raises(ValueError, match="unknown store URL"):
        http_app(app, environ={"MRTR_STORE": "mongodb://x"})
    with pytest.raises(ValueError, match="path must start with '/'"):
        app.http_app("mcp")


class Closing(MemoryStore):
    closed = 0

    async def aclose(self) -> None:
        self.closed += 1


def lifespan_of(mcp: McpApp, store: Closing) -> list[str]:
    """Run `mcp`'s ASGI lifespan; the store must be closed only when shutdown completes."""
    sent: list[str] = []
    inbox = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def receive() -> dict[str, Any]:
        return inbox.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])
        assert store.closed == (mcp.owns_store and message["type"] == "lifespan.shutdown.complete")

    asyncio.run(mcp({"type": "lifespan"}, receive, send))
    return sent


def test_18_the_asgi_lifespan_closes_the_store() -> None:
    mcp = app.http_app()
    store = Closing()
    mcp.dispatcher = Dispatcher(app, store=store)
    assert lifespan_of(mcp, store) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert store.closed == 1


def test_24_a_hand_built_mcp_app_leaves_its_callers_store_open() -> None:
    store = Closing()
    mcp = McpApp(Dispatcher(app, store=store))
    assert lifespan_of(mcp, store) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert store.closed == 0
    owning = McpApp(Dispatcher(app, store=store), owns_store=True)
    lifespan_of(owning, store)
    assert store.closed == 1


def test_24_a_parent_app_runs_the_lifespan_as_a_context_manager() -> None:
    mcp = app.http_app()
    store = Closing()
    mcp.dispatcher = Dispatcher(app, store=store)

    async def parent() -> None:
        async with mcp.lifespan(object()):  # FastAPI(lifespan=mcp.lifespan) passes the app
            assert store.closed == 0
        assert store.closed == 1

    asyncio.run(parent())


def test_18_mounted_at_a_prefix_the_endpoint_is_prefix_plus_path() -> None:
    mcp = app.http_app()
    found = post(mcp, call("sure"), url="http://127.0.0.1/tools/mcp", root_path="/tools")
    assert found["result"]["resultType"] == "input_required"


def test_24_a_hand_built_mcp_app_honours_root_path_when_mounted() -> None:
    mcp = McpApp(Dispatcher(app))
    found = post(mcp, call("sure"), url="http://127.0.0.1/tools/mcp", root_path="/tools")
    assert found["result"]["resultType"] == "input_required"
    unmounted = post(mcp, call("sure"), url="http://127.0.0.1/tools/mcp")
    assert unmounted["error"]["message"].startswith("Not Found")


def test_24_mcp_app_takes_a_server_and_builds_its_dispatcher() -> None:
    mcp = McpApp(app, path="/x")
    assert isinstance(mcp.dispatcher, Dispatcher) and mcp.dispatcher.server is app
    assert post(mcp, call("sure"), url="http://127.0.0.1/x")["result"]["resultType"] == \
        "input_required"


def test_24_http_app_builds_an_mcp_app_that_owns_its_store() -> None:
    mcp = app.http_app()
    assert type(mcp) is McpApp and mcp.owns_store  # ServerApp is now a deprecated name of it
    assert not McpApp(app).owns_store


def test_18_run_refuses_an_unknown_transport() -> None:
    with pytest.raises(ValueError, match="transport must be 'stdio' or 'http'"):
        run(app, "websocket")  # type: ignore[arg-type]


def test_18_workers_find_the_server_by_its_module_attribute() -> None:
    assert locate(app) == f"{__name__}:app"
    with pytest.raises(ValueError, match="module-level attribute"):
        locate(Server("nowhere"))


SCRIPT = """\
import sys
from mrtr import Server

app = Server("scripted", version="1")

@app.tool()
def where() -> str:
    '''Say which process answers.'''
    print("a stray print goes to stderr")
    return __name__

if __name__ == "__main__":
    app.run(*sys.argv[1:2], **{k: int(v) for k, v in (a.split("=") for a in sys.argv[2:])})
"""


def test_18_run_over_stdio_answers_on_stdout_only(tmp_path: Path) -> None:
    script = tmp_path / "scripted.py"
    script.write_text(SCRIPT)
    lines = msgspec.json.encode(call("where")) + b"\n"
    env = {**cli_env(), "MRTR_EPHEMERAL_KEY": "1"}
    done = subprocess.run([sys.executable, str(script)], input=lines, capture_output=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert b'"text":"__main__"' in done.stdout and done.stdout.count(b"\n") == 1
    assert b"a stray print goes to stderr" in done.stderr


@pytest.mark.slow
def test_18_run_over_http_with_two_workers(tmp_path: Path) -> None:
    script = tmp_path / "scripted_http.py"
    script.write_text(SCRIPT)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**cli_env(), "MRTR_STATE_KEYS": generate_key()}
    with (tmp_path / "log").open("wb") as log:
        process = subprocess.Popen([sys.executable, str(script), "http", f"port={port}",
                                    "workers=2"], cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        wait_ready(url, process)
        reply = httpx.post(url, timeout=10, **post_args(call("where"))).json()
        # Workers import the file by its path, under its own name: never run as __main__ again.
        assert reply["result"]["content"][0]["text"] == "scripted_http"
    finally:
        stop(process)
    assert b"serving on http://127.0.0.1:" in (tmp_path / "log").read_bytes()


def test_18_a_server_built_with_http_app_never_loads_the_client_stack() -> None:
    code = ("import sys; from examples.bookings import app; app.http_app(); "
            "print(','.join(m for m in ('httpx', 'mrtr.client') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=cli_env(), check=True)
    assert out.stdout.strip() == ""
