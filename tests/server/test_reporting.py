"""Progress and log messages over the rounds of a flow (#27): each is sent once, by the round
that ran it first, and `TestClient` flows record them for assertions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mrtr.protocol import ElicitRequest, ElicitRequestFormParams
from mrtr.server import Context, Form, InputRequired, Server
from mrtr.testing import TestClient, then

app = Server("reporting-tests", version="1")


class Pickup(Form):
    boxes: int


@app.tool()
async def book(ctx: Context, order: str) -> str:
    await ctx.info(f"booking {order}")
    await ctx.report_progress(1, 3, "started")
    pickup = await ctx.elicit("How many boxes?", Pickup, key="pickup")
    await ctx.debug(f"{pickup.boxes} boxes")
    await ctx.report_progress(2, 3)
    if not await ctx.confirm("Sure?", key="sure"):
        return "no"
    await ctx.warning("carrier late", logger="carrier")
    await ctx.report_progress(3, 3, "booked")
    return f"booked {pickup.boxes}"


QUESTION = ElicitRequest(params=ElicitRequestFormParams(
    message="Name?", requested_schema={"type": "object", "properties": {
        "name": {"type": "string"}}, "required": ["name"]}))


@app.tool()
async def guarded(ctx: Context) -> Any:
    await ctx.info(f"round {ctx.round} starts")  # the same line every round: sent once
    answer = ctx.input_responses.get("name")
    if answer is None:
        return InputRequired(asks={"name": QUESTION})
    await ctx.info("got the name")
    return "ok"


def test_a_three_round_flow_sends_each_line_once_issue27() -> None:
    with TestClient(app) as client:
        flow = client.call_tool("book", {"order": "A-1"},
                                answers={"pickup": {"boxes": 2}, "sure": True})
    assert flow.rounds == 3 and flow.text == "booked 2"
    assert flow.logs == [{"level": "info", "data": "booking A-1"},
                         {"level": "debug", "data": "2 boxes"},
                         {"level": "warning", "data": "carrier late", "logger": "carrier"}]
    assert [(p["progress"], p.get("message")) for p in flow.progress] == [
        (1, "started"), (2, None), (3, "booked")]
    assert len({p["progressToken"] for p in flow.progress}) == 3  # one token per round
    assert [n["method"] for n in flow.notifications] == [
        "notifications/message", "notifications/progress", "notifications/message",
        "notifications/progress", "notifications/message", "notifications/progress"]


def test_a_reasked_form_does_not_repeat_what_came_before_it_issue27() -> None:
    with TestClient(app) as client:
        flow = client.call_tool("book", {"order": "A-1"}, answers={
            "pickup": then({"boxes": "two"}, {"boxes": 2}), "sure": True})
    assert flow.rounds == 4
    assert [entry["data"] for entry in flow.logs] == ["booking A-1", "2 boxes", "carrier late"]


def test_a_guard_style_handler_is_caught_up_once_it_reads_the_answers_issue27() -> None:
    with TestClient(app) as client:
        flow = client.call_tool("guarded", answers={"name": {"name": "Ada"}})
    assert flow.text == "ok"
    assert [entry["data"] for entry in flow.logs] == ["round 1 starts", "got the name"]


def test_log_level_none_records_progress_only_and_levels_filter_issue27() -> None:
    answers = {"pickup": {"boxes": 2}, "sure": True}
    with TestClient(app, log_level=None) as client:
        quiet = client.call_tool("book", {"order": "A-1"}, answers=answers)
    assert quiet.logs == [] and len(quiet.progress) == 3
    with TestClient(app, log_level="warning") as client:
        loud = client.call_tool("book", {"order": "A-1"}, answers=answers)
    assert [entry["level"] for entry in loud.logs] == ["warning"]


def test_the_docs_example_runs_issue27() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "server.md"
    if not docs.exists():  # `make mutate` stages copy src/, tests/ and examples/ only
        pytest.skip("docs/ is not beside the tests (a mutation stage)")
    section = docs.read_text().split("### Progress and log messages\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    ns: dict[str, Any] = {"__name__": "docs_reporting"}
    exec(compile(code, str(docs), "exec", dont_inherit=True), ns)  # its asserts are the test
    assert ns["flow"].rounds == 3
