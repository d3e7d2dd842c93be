"""URL elicitation that completes (#29), in process: a 2025 session waits out "not yet" rounds.

Over real HTTP, on two replicas, with forged ids: tests/transports/test_url_completion.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mrtr.protocol import RETRY_AFTER_KEY
from mrtr.server import Context, Dispatcher, Server, SessionServer
from mrtr.testing import TestClient
from tests.server.test_session_server import PEER, Client

app = Server("completions-test")


@app.tool()
async def link(ctx: Context) -> str:
    """Sends the user to a page and waits until it is done."""
    done = await ctx.elicit_url_done("Link your account", lambda i: f"https://x.example/{i}")
    assert isinstance(done, dict)
    return f"linked {done.get('account')}"


def test_a_2025_session_waits_for_the_completion_then_notifies() -> None:
    dispatcher = Dispatcher(app)
    dispatcher.completions.retry_after = 0.05
    server = SessionServer(dispatcher, ask_timeout=5.0)
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"url": {}}},
        "clientInfo": {"name": "t", "version": "1"}}}
    session, _ = server.initialize(message, PEER)
    assert session is not None
    later: list[asyncio.Task[None]] = []

    async def finish(url: str) -> None:  # the user signs in a moment after accepting
        await asyncio.sleep(0.3)
        await dispatcher.completions.complete(url.rsplit("/", 1)[1], {"account": "ann"})

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        later.append(asyncio.create_task(finish(request["params"]["url"])))
        return {"result": {"action": "accept"}}

    client = Client(server, session, answer)

    async def scenario() -> dict[str, Any]:
        return await client.call("tools/call", {"name": "link", "arguments": {}})

    reply = asyncio.run(asyncio.wait_for(scenario(), 10))
    assert reply["result"]["content"][0]["text"] == "linked ann"
    asked = client.requests("elicitation/create")
    assert len(asked) == 1  # asked once; the waiting rounds sent nothing to the client
    done = [m for m in client.sent if m.get("method") == "notifications/elicitation/complete"]
    assert done == [{"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                     "params": {"elicitationId": asked[0]["params"]["elicitationId"]}}]


def test_not_yet_rounds_do_not_count_against_max_rounds_and_carry_the_hint() -> None:
    with TestClient(app, max_rounds=3) as client:  # the server's limit: 3 rounds per flow
        params: dict[str, Any] = {"name": "link", "arguments": {}}
        first = client.request("tools/call", params)
        assert first["inputRequests"]["url"]["params"]["mode"] == "url"
        state = first["requestState"]
        for _ in range(10):  # 10 "not yet" rounds, none refused as one too many
            result = client.request("tools/call", {
                **params, "requestState": state,
                "inputResponses": {"url": {"action": "accept"}}})
            assert "inputRequests" not in result
            assert result["_meta"] == {RETRY_AFTER_KEY: 2000}
            state = result["requestState"]


def test_completed_data_comes_back_and_a_forged_id_is_refused() -> None:
    from mrtr.server._completions import UnknownElicitation

    with TestClient(app, max_rounds=3) as client:
        seen: list[str] = []

        def browser(request: dict[str, Any]) -> dict[str, str]:
            seen.append(request["params"]["url"])
            client.complete_url(request["params"]["url"] + "?account=ann")
            return {"action": "accept"}

        flow = client.call_tool("link", answers={"url": browser})
        assert flow.text == "linked ann" and flow.rounds == 2
        with pytest.raises(UnknownElicitation):
            client.complete_url("https://x.example/v1.forged")
        declined = client.call_tool("link", answers={"url": {"action": "decline"}})
        assert declined.result["isError"] and "declined" in declined.text
        json.dumps(seen)
