"""A tour of `mrtr.testing.TestClient`: run it with `pytest examples/testing/test_tour.py`."""

from __future__ import annotations

from typing import Any

import pytest

from mrtr import Context, Form, MissingRequiredClientCapability, Server
from mrtr.testing import ANSWER_CANCEL, ANSWER_DECLINE, TestClient, then

app = Server("tour")


class Team(Form):
    team: str


@app.tool()
async def join(ctx: Context, event: str) -> str:
    """Join an event as a team, after a confirmation."""
    answer = await ctx.elicit(f"Which team joins {event}?", Team, key="team")
    if not await ctx.confirm(f"Sign {answer.team} up as {ctx.principal}?", key="confirm"):
        return "Not signed up."
    return f"{answer.team} joins {event}."


@app.prompt()
def welcome(name: str, tone: str = "warm") -> str:
    """A welcome message."""
    return f"Write a {tone} welcome for {name}."


@app.resource("tour://rules", mime_type="text/plain")
def rules() -> str:
    """The rules."""
    return "Be kind."


def test_answers_are_scripted_by_ask_key() -> None:
    with TestClient(app, principal="user:ann") as client:  # principal: what ctx.principal sees
        flow = client.call_tool("join", {"event": "cup"},
                                answers={"team": {"team": "red"}, "confirm": True})
    assert flow.text == "red joins cup." and flow.rounds == 3
    assert flow.asked(2)["confirm"]["params"]["message"] == "Sign red up as user:ann?"


def test_successive_answers_and_callables() -> None:
    def confirm_red_only(request: dict[str, Any]) -> bool:  # sees the whole input request
        return " red " in request["params"]["message"]

    with TestClient(app) as client:
        flow = client.call_tool("join", {"event": "cup"}, answers={
            "team": then({"team": "blue"}, {"team": "red"}),  # one answer per round, in order
            "confirm": confirm_red_only,
        })
    assert flow.text == "Not signed up."  # "team" was asked once: the first answer was used


def test_decline_and_cancel() -> None:
    with TestClient(app) as client:
        for answer in (ANSWER_DECLINE, ANSWER_CANCEL):
            flow = client.call_tool("join", {"event": "cup"}, answers={"team": answer})
            assert flow.result.get("isError") is True  # an unhandled decline ends the tool


def test_prompts_and_resources() -> None:
    with TestClient(app) as client:
        prompt = client.get_prompt("welcome", {"name": "Ann"}).result
        assert prompt["messages"][0]["content"]["text"] == "Write a warm welcome for Ann."
        resource = client.read_resource("tour://rules").result
        assert resource["contents"][0]["text"] == "Be kind."


def test_capabilities_are_all_declared_unless_you_say_otherwise() -> None:
    with TestClient(app, capabilities={}) as client:  # a client that can answer nothing
        flow = client.call_tool("join", {"event": "cup"})
    with pytest.raises(MissingRequiredClientCapability) as caught:
        _ = flow.result  # a call that ended in a wire error raises it here
    assert str(caught.value) == "Missing required client capability (needs elicitation.form)"
