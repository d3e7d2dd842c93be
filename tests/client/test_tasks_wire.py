"""What the client sends for tasks: the official schemas, 2025 sessions, real HTTP (#14)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr.client import Client, ClientError, Handlers
from mrtr.client.transports._http import HTTPTransport

from .mocks import MockServer, client_for
from .rogue import serve
from .session_mock import SessionMock
from .tasks_mock import TASK_ID, TASKS, TaskServer, asking, completed, working
from .test_tasks import Asker, run, text

REQUEST_DEFS = {"tools/call": "CallToolRequest", "tasks/get": "GetTaskRequest",
                "tasks/update": "UpdateTaskRequest", "tasks/cancel": "CancelTaskRequest"}


def _full_flow(app: MockServer) -> None:
    async def go() -> None:
        async with client_for(app, Handlers(elicitation=Asker())) as client:
            await client.call_tool("confirm_delete", {"filename": "a.txt"})
            await client.tasks.cancel(TASK_ID)

    run(go())


def test_everything_sent_validates_against_the_official_schemas(shared_dir: Path) -> None:
    from tests.protocol.test_schema_valid import validator

    app = MockServer(TaskServer([working(), asking("a"), completed()]))
    _full_flow(app)
    methods = {body["method"] for _, body in app.seen}
    assert set(REQUEST_DEFS) <= methods
    for _, body in app.seen:
        definition = REQUEST_DEFS.get(body["method"])
        if definition is None:
            continue
        errors = [e.message for e in validator(definition).iter_errors(body)]
        assert not errors, (body["method"], errors)
        meta = body["params"]["_meta"]  # core: `_meta` on every request, tasks/* too
        assert not list(validator("RequestMetaObject").iter_errors(meta)), meta
        extension = meta["io.modelcontextprotocol/clientCapabilities"]["extensions"][TASKS]
        assert not list(validator("TasksExtensionCapability").iter_errors(extension))


def test_a_2025_session_never_declares_or_sends_tasks() -> None:
    app = SessionMock()
    transport = HTTPTransport("http://mock/mcp", transport=httpx.ASGITransport(app=app))

    async def go() -> str:
        async with Client(transport) as client:  # auto: the probe finds MCP 2025
            result = text(await client.call_tool("other", {}))
            with pytest.raises(ClientError, match="2026-07-28"):
                await client.tasks.get(TASK_ID)
            return result

    assert run(go()) == "ok"
    initialize = next(s.body for s in app.seen if s.body.get("method") == "initialize")
    assert "extensions" not in initialize["params"]["capabilities"]
    call = next(s.body for s in app.seen if s.body.get("method") == "tools/call")
    assert TASKS not in str(call)
    assert not [s for s in app.seen if str(s.body.get("method", "")).startswith("tasks/")]


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, TaskServer]]:
    server = TaskServer([working("half way"), asking("a"), completed("over real HTTP")],
                        poll_ms=50)
    for url in serve(MockServer(server)):
        yield url, server


def test_real_http_end_to_end(live: tuple[str, TaskServer]) -> None:
    url, server = live
    seen: list[Any] = []

    async def go() -> str:
        transport = HTTPTransport(f"{url}/mcp")
        async with Client(transport, handlers=Handlers(elicitation=Asker()),
                          mode="modern") as client:
            return text(await client.call_tool("report", {}, on_task=seen.append))

    assert asyncio.run(asyncio.wait_for(go(), 20)) == "over real HTTP"
    assert [t.status for t in seen] == ["working", "working", "input_required", "completed"]
    assert server.updates == [{"a": {"action": "accept", "content": {"ok": True}}}]
