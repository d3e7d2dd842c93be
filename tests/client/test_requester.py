"""The one Requester a Client shares with `client.tasks`: one id counter, live settings (#24)."""

from __future__ import annotations

import asyncio

from mrtr.client import ClientError
from mrtr.protocol import ClientCapabilities, Implementation

from .mocks import MockServer, client_for
from .tasks_mock import TASK_ID, TASKS, TaskServer, completed, working

CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"


def test_client_and_tasks_draw_ids_from_one_counter() -> None:
    app = MockServer(TaskServer([working(), completed()]))

    async def main() -> None:
        async with client_for(app) as client:
            await client.list_tools()
            await client.tasks.get(TASK_ID)
            await client.call_tool("slow")  # a task: tools/call, then tasks/get until done
            await client.tasks.update(TASK_ID, {})
            await client.tasks.cancel(TASK_ID)

    asyncio.run(main())
    ids = [body["id"] for body in app.bodies()]
    methods = {body["method"] for body in app.bodies()}
    assert {"tools/list", "tools/call", "tasks/get", "tasks/update", "tasks/cancel"} <= methods
    assert ids == sorted(set(ids)), ids  # never reused, whichever object sent the request


def test_settings_changed_after_construction_reach_client_and_tasks() -> None:
    app = MockServer(TaskServer([completed()]))

    async def main() -> None:
        async with client_for(app) as client:
            client.capabilities = ClientCapabilities(sampling={})
            client.client_info = Implementation(name="renamed", version="9")
            await client.list_tools()
            await client.tasks.get(TASK_ID)
            client.declare_tasks = False
            try:
                await client.tasks.get(TASK_ID)
            except ClientError:
                pass
            else:
                raise AssertionError("tasks.get ran with the extension off")
            await client.list_tools(refresh=True)

    asyncio.run(main())
    first, get, last = (body["params"]["_meta"] for body in app.bodies())
    for meta in (first, get):
        assert meta[CAPS] == {"sampling": {}, "extensions": {TASKS: {}}}
        assert meta[INFO] == {"name": "renamed", "version": "9"}
    assert last[CAPS] == {"sampling": {}}
