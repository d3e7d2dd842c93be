"""Tasks for OAuth-authenticated callers, against the real local authorization server (#25).

Before #25 every task tool call with a bearer token failed with HTTP 500 (the Principal object
could not be encoded into the task record) and kept a live-task slot: after `max_live` tries the
caller was locked out.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from mrtr import Context, Server
from mrtr.auth import ResourceServer
from mrtr.http import McpApp
from mrtr.protocol import TASKS_EXTENSION
from mrtr.server import Dispatcher, Principal, TaskPolicy
from mrtr.stores import SQLiteStore
from tests.auth.authserver import AuthServer
from tests.auth.conftest import RESOURCE, settings
from tests.auth.task_app import task_app
from tests.auth.test_serve_auth import wait_refusing
from tests.transports.conftest import (
    asgi_client,
    cli_env,
    free_port,
    post_args,
    request,
    run,
    spawn_cli,
    stop,
)

CAPS = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}},
                                                       "extensions": {TASKS_EXTENSION: {}}}}


class Caller:
    """Raw JSON-RPC over HTTP with a bearer token; tasks/* carry Mcp-Name = taskId."""

    def __init__(self, client: httpx.AsyncClient, token: str | None, path: str = "/mcp") -> None:
        self.client, self.token, self.path = client, token, path

    async def post(self, method: str, params: dict[str, Any]) -> httpx.Response:
        body = request(method, params, **CAPS)
        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        if method.startswith("tasks/"):
            headers["mcp_name"] = params["taskId"]
        args = post_args(body, **headers)
        return await self.client.post(self.path, timeout=10, **args)

    async def rpc(self, method: str, params: dict[str, Any], status: int = 200) -> dict[str, Any]:
        response = await self.post(method, params)
        assert response.status_code == status, (response.status_code, response.text)
        return response.json()  # type: ignore[no-any-return]

    async def wait(self, task_id: str, *statuses: str) -> dict[str, Any]:
        async with asyncio.timeout(10):
            while True:
                task = (await self.rpc("tasks/get", {"taskId": task_id}))["result"]
                if task["status"] in statuses:
                    return task  # type: ignore[no-any-return]
                await asyncio.sleep(0.01)


async def ask_answer_complete(caller: Caller, intruder: Caller) -> dict[str, Any]:
    """One task: created, asked, answered and completed by `caller`; `intruder` sees nothing."""
    created = await caller.rpc("tools/call", {"name": "file_note",
                                              "arguments": {"title": "milk"}})
    task = created["result"]
    assert task["resultType"] == "task" and task["status"] == "working", created
    asked = await caller.wait(task["taskId"], "input_required")
    assert list(asked["inputRequests"]) == ["file"], asked
    foreign = await intruder.rpc("tasks/get", {"taskId": task["taskId"]}, status=400)
    assert foreign["error"]["code"] == -32602, foreign  # another user's task: unknown to them
    refused = await intruder.rpc("tasks/update", {"taskId": task["taskId"], "inputResponses": {
        "file": {"action": "accept", "content": {"ok": False}}}}, status=400)
    assert refused["error"]["code"] == -32602, refused  # and nothing of theirs is stored
    ack = await caller.rpc("tasks/update", {"taskId": task["taskId"], "inputResponses": {
        "file": {"action": "accept", "content": {"ok": True}}}})
    assert ack["result"]["resultType"] == "complete", ack
    return await caller.wait(task["taskId"], "completed", "failed", "cancelled")


def test_25_an_authenticated_caller_runs_a_task_end_to_end_and_keeps_no_slot(
    auth: AuthServer, tmp_path: Path,
) -> None:
    dispatcher = Dispatcher(task_app(), store=SQLiteStore(tmp_path / "tasks.db"))
    mcp = McpApp(dispatcher, authenticator=ResourceServer(settings(auth)))
    alice = auth.mint(aud=RESOURCE, scope="notes:read")
    mallory = auth.mint(aud=RESOURCE, sub="mallory")
    principal = Principal(auth.issuer, "alice", "service")

    async def go() -> tuple[dict[str, Any], list[int], int, int]:
        async with asgi_client(mcp) as client:
            caller, intruder = Caller(client, alice), Caller(client, mallory)
            done = await ask_answer_complete(caller, intruder)
            anonymous = await Caller(client, None).post(
                "tools/call", {"name": "quick", "arguments": {}})
            assert anonymous.status_code == 401
            codes: list[int] = []
            for _ in range(100):  # cap 3: each ends and gives its slot back
                response = await caller.post("tools/call", {"name": "quick", "arguments": {}})
                codes.append(response.status_code)
                if response.status_code == 200:
                    task_id = response.json()["result"]["taskId"]
                    finished = await caller.wait(task_id, "completed", "failed")
                    assert finished["result"]["content"][0]["text"] == "done for alice"
            book = dispatcher.tasks.book
            return done, codes, await book.live(principal), await book.live(None)

    done, codes, live, anonymous_live = run(go(), timeout=60)
    summary = (f"authenticated tasks: {done['status']}, then 100 task calls -> "
               f"{codes.count(200)} x 200, {len(codes) - codes.count(200)} other; "
               f"{live} slots left for alice, {anonymous_live} anonymous")
    print("\n" + summary)
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == (
        "alice (service; notes:read) filed milk: True"), done
    assert codes == [200] * 100 and live == 0 and anonymous_live == 0, summary


def test_25_each_principal_has_its_own_cap_and_anonymous_callers_theirs(
    auth: AuthServer,
) -> None:
    app = Server("caps", tasks=TaskPolicy(max_live=2, max_live_anonymous=0, lease=0.6))

    @app.tool(task="required")
    async def hold(ctx: Context) -> str:
        await asyncio.sleep(60)
        return "held"

    dispatcher = Dispatcher(app)
    mcp = McpApp(dispatcher, authenticator=ResourceServer(settings(auth)))
    tokens = {who: auth.mint(aud=RESOURCE, sub=who) for who in ("alice", "bob")}

    async def go() -> dict[str, list[bool]]:
        async with asgi_client(mcp) as client:
            made: dict[str, list[bool]] = {}
            for who in ("alice", "bob"):
                caller = Caller(client, tokens[who])
                made[who] = [(await caller.rpc("tools/call", {"name": "hold", "arguments": {}}))
                             ["result"].get("resultType") == "task" for _ in range(3)]
            for task in list(dispatcher.tasks.live.values()):
                task.cancel()
            return made

    made = run(go())
    assert made == {"alice": [True, True, False], "bob": [True, True, False]}, made


@pytest.mark.slow
def test_25_mrtr_serve_auth_issuer_runs_tasks_for_the_token_holder(
    auth: AuthServer, tmp_path: Path,
) -> None:
    """`mrtr serve --auth-issuer` (its default SQLite store, 2 workers): the same task flow."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**cli_env(), "XDG_STATE_HOME": str(tmp_path)}  # its key file and store: here
    server = spawn_cli("serve", "tests/auth/task_app.py:app", "--port", str(port),
                       "--workers", "2", "--auth-issuer", auth.issuer, "--log-level", "warning",
                       env=env)
    try:
        wait_refusing(url, server)
        token = httpx.post(f"{auth.issuer}/token", auth=("service", "service-secret"), data={
            "grant_type": "client_credentials", "scope": "notes:read", "resource": url},
            timeout=10).json()["access_token"]
        other = auth.mint(aud=url, sub="mallory")

        async def go() -> dict[str, Any]:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                return await ask_answer_complete(Caller(client, token), Caller(client, other))

        done = run(go(), timeout=60)
        print(f"\nmrtr serve --auth-issuer --workers 2: task {done['status']}: "
              f"{done['result']['content'][0]['text']}")
        assert done["result"]["content"][0]["text"] == (
            "service (service; notes:read) filed milk: True"), done
    finally:
        stop(server)
