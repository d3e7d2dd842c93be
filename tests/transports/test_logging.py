"""Log records carry request id, flow id, round and a principal digest; JSON lines for shippers."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from mrtr.server import Context, Dispatcher, Form, Peer, Server
from mrtr.serving._logging import JsonFormatter, RequestContext, TextFormatter, log_config
from tests.transports.conftest import (
    call,
    cli_env,
    free_port,
    post_args,
    request,
    spawn_cli,
    stop,
    wait_ready,
)

app = Server("logging-tests", version="1")
tool_log = logging.getLogger("tests.logging.tool")


class Name(Form):
    name: str


@app.tool()
async def greet(ctx: Context) -> str:
    tool_log.warning("round with Authorization: Bearer abc.def-123 seen")
    name = await ctx.elicit("Your name?", Name, key="name")
    return f"Hello {name.name}"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RequestContext())
    handler.setFormatter(JsonFormatter())
    tool_log.addHandler(handler)
    level = tool_log.level
    tool_log.setLevel(logging.INFO)  # whatever level an earlier test left on the root logger
    try:
        yield stream
    finally:
        tool_log.removeHandler(handler)
        tool_log.setLevel(level)


def handle(dispatcher: Dispatcher, body: dict[str, object], principal: str) -> dict[str, object]:
    reply = asyncio.run(dispatcher.handle_bytes(msgspec.json.encode(body),
                                                Peer(principal=principal, transport="http")))
    assert reply is not None
    decoded: dict[str, object] = msgspec.json.decode(reply.body)
    return decoded


def test_records_from_a_request_carry_its_ids_and_no_secret(captured: io.StringIO) -> None:
    dispatcher = Dispatcher(app)
    first = handle(dispatcher, call("greet", id="r-1"), "alice@example.com")
    state = first["result"]["requestState"]  # type: ignore[index]
    handle(dispatcher, call("greet", id="r-2", requestState=state, inputResponses={
        "name": {"action": "accept", "content": {"name": "Ada"}}}), "alice@example.com")
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    assert [(e["request_id"], e["round"]) for e in lines] == [("r-1", 1), ("r-2", 2)]
    assert "flow_id" not in lines[0]  # round 1 has no flow id until it suspends
    assert len(lines[1]["flow_id"]) >= 12
    digest = hashlib.sha256(b"alice@example.com").hexdigest()[:16]
    assert {e["principal"] for e in lines} == {digest}
    text = captured.getvalue()
    assert "alice@example.com" not in text and "abc.def-123" not in text
    assert lines[0]["message"] == "round with Authorization: Bearer *** seen"
    assert lines[0]["level"] == "warning" and lines[0]["logger"] == "tests.logging.tool"


def test_records_outside_a_request_have_no_request_fields() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello %s", ("world",), None)
    assert RequestContext().filter(record)
    assert json.loads(JsonFormatter().format(record))["message"] == "hello world"
    assert "request_id" not in json.loads(JsonFormatter().format(record))
    assert TextFormatter().format(record) == "INFO x: hello world"


def test_log_config_refuses_an_unknown_format() -> None:
    with pytest.raises(ValueError, match="log-format"):
        log_config("info", "xml")
    assert log_config("info", "json", access_log=True)["loggers"]["uvicorn.access"]["propagate"]


@pytest.mark.slow
def test_mrtr_serve_log_format_json_writes_one_object_per_line(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log_path = tmp_path / "stderr.log"
    with log_path.open("wb") as log:
        process = spawn_cli("serve", "examples.payments:app", "--port", str(port), "--store",
                            "none", "--log-format", "json", "--access-log",
                            stdout=subprocess.DEVNULL, stderr=log, env=cli_env())
    try:
        wait_ready(url, process)
        bad = call("pay", {"invoice": "INV-1", "amount": 1}, id="req-9",
                   requestState="not-a-state")
        assert httpx.post(url, timeout=10, **post_args(bad)).json()["error"]["code"] == -32602
        httpx.post(url, timeout=10, **post_args(request("server/discover")))
    finally:
        stop(process)
    entries = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    rejected = [e for e in entries if "requestState rejected" in e["message"]]
    assert rejected and rejected[0]["request_id"] == "req-9" and rejected[0]["round"] == 1
    assert any(e["logger"] == "uvicorn.access" and "POST /mcp" in e["message"]
               for e in entries)
    assert any("serving on" in e["message"] for e in entries)
