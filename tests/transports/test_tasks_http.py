"""Tasks over Streamable HTTP: Mcp-Name is the taskId, listen is an SSE stream (#14)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from mrtr.http import McpApp
from mrtr.protocol import TASKS_EXTENSION, SSEParser
from mrtr.server import Dispatcher
from mrtr.stores import MemoryStore
from tests.server.test_tasks import app
from tests.transports.conftest import asgi_client, post_args, request, run

CAPS = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


def body(method: str, params: dict[str, Any], id: int = 1) -> dict[str, Any]:
    return request(method, params, id=id, **CAPS)


async def create(client: httpx.AsyncClient, seconds: float) -> str:
    call = body("tools/call", {"name": "slow", "arguments": {"seconds": seconds}})
    response = await client.post("/mcp", **post_args(call))
    return str(response.json()["result"]["taskId"])


def test_tasks_methods_check_mcp_name_against_the_task_id() -> None:
    async def go() -> None:
        async with asgi_client(McpApp(Dispatcher(app, store=MemoryStore()))) as client:
            task_id = await create(client, 0)
            get = body("tasks/get", {"taskId": task_id})
            ok = await client.post("/mcp", **post_args(get, mcp_name=f" {task_id} "))
            assert ok.status_code == 200 and ok.json()["result"]["taskId"] == task_id
            for method in ("tasks/get", "tasks/cancel"):
                for headers in ({"mcp_name": "another-task"}, {}):
                    response = await client.post(
                        "/mcp", **post_args(body(method, {"taskId": task_id}), **headers))
                    assert response.status_code == 400, (method, headers)
                    assert response.json()["error"]["code"] == -32020
    run(go())


def test_listen_is_an_sse_stream_that_ends_with_the_task() -> None:
    async def go() -> None:
        async with asgi_client(McpApp(Dispatcher(app, store=MemoryStore()))) as client:
            task_id = await create(client, 0.3)
            listen = body("subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, 7)
            response = await client.post("/mcp", **post_args(listen))
            assert response.headers["content-type"].startswith("text/event-stream")
            parser = SSEParser()
            messages = [json.loads(e.data) for e in parser.feed(response.content) + parser.close()]
            methods = [m.get("method") for m in messages]
            assert methods[0] == "notifications/subscriptions/acknowledged"
            assert set(methods[1:-1]) == {"notifications/tasks"} and methods[-1] is None
            assert messages[-2]["params"]["status"] == "completed"
            assert messages[-1]["result"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": 7}
    run(go())
