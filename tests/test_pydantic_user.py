"""A FastMCP user's pydantic server (examples/pydantic_server.py), tested as they would (#27).

Models with `Field` constraints as parameters, returns and forms: through `TestClient`, then
over real HTTP with the official `mcp` 1.x client (its own virtualenv, shared with
tests/client/test_interop_mcp1.py). Bounds are enforced, descriptions are in the schemas,
results are structured with an `outputSchema`, and an invalid form answer is asked again.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from examples.pydantic_server import Pickup, Review, mcp
from mrtr.http import McpApp
from mrtr.server import Dispatcher
from mrtr.testing import TestClient, then
from tests.client.test_interop_mcp1 import mcp1_python  # noqa: F401 - the shared venv
from tests.transports.conftest import LiveServer, free_port

PICKUP = {"email": "ann@example.com", "boxes": 2, "day": "2026-12-01"}


@pytest.fixture
def client() -> Any:
    with TestClient(mcp) as test_client:
        yield test_client


def tools(client: TestClient) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in client.request("tools/list")["tools"]}


def test_field_constraints_and_descriptions_are_in_the_input_schema(client: TestClient) -> None:
    rate = tools(client)["rate"]["inputSchema"]
    assert rate["type"] == "object" and rate["required"] == ["product", "stars"]
    assert rate["properties"]["stars"] == {
        "type": "integer", "minimum": 1, "maximum": 5,
        "description": "From 1 (poor) to 5 (excellent)"}
    best = tools(client)["best"]["inputSchema"]
    assert best["properties"]["n"] == {"type": "integer", "minimum": 1, "default": 1,
                                       "description": "How many to keep"}
    jsonschema.Draft202012Validator.check_schema(best)
    review = {"product": "kettle", "stars": 4, "summary": "ok"}
    jsonschema.validate({"reviews": [review]}, best)  # the model's schema, under $defs
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"reviews": [{**review, "stars": 6}]}, best)


def test_out_of_bounds_arguments_are_invalid(client: TestClient) -> None:
    flow = client.call_tool("rate", {"product": "kettle", "stars": 9})
    assert flow.result["isError"] is True
    assert flow.text == ("Invalid arguments: Input should be less than or equal to 5 - at "
                         "`$.stars`")
    nested = client.call_tool("best", {"reviews": [{"product": "x", "stars": 0, "summary": ""}]})
    assert nested.text == ("Invalid arguments: Input should be greater than or equal to 1 - at "
                           "`$.reviews[0].stars`")
    missing = client.call_tool("rate", {"stars": 3})
    assert missing.text == "Invalid arguments: Field required - at `$.product`"


def test_a_model_return_is_structured_content_with_an_output_schema(client: TestClient) -> None:
    schema = tools(client)["rate"]["outputSchema"]
    assert schema == Review.model_json_schema(mode="serialization")
    flow = client.call_tool("rate", {"product": "kettle", "stars": 4})
    assert flow.result["structuredContent"] == {"product": "kettle", "stars": 4,
                                                "summary": "****"}
    assert json.loads(flow.text) == flow.result["structuredContent"]
    jsonschema.validate(flow.result["structuredContent"], schema)


def test_a_list_of_models_is_wrapped_as_result(client: TestClient) -> None:
    schema = tools(client)["best"]["outputSchema"]
    assert schema["type"] == "object" and schema["required"] == ["result"]
    reviews = [{"product": p, "stars": s, "summary": ""} for p, s in (("a", 2), ("b", 5))]
    flow = client.call_tool("best", {"reviews": reviews, "n": 1})
    assert flow.result["structuredContent"] == {"result": [reviews[1]]}
    assert json.loads(flow.text) == [reviews[1]]  # the text is the value itself
    jsonschema.validate(flow.result["structuredContent"], schema)


def test_a_model_form_is_asked_and_an_invalid_answer_asked_again(client: TestClient) -> None:
    flow = client.call_tool("schedule_pickup", {"order_id": "A-1"}, answers={
        "elicit-1": then({**PICKUP, "boxes": 9}, {**PICKUP, "email": "ann@example..com"},
                         PICKUP)})
    assert flow.rounds == 4
    assert flow.text == "2 box(es) on 2026-12-01, label to ann@example.com"
    asked = flow.asked(1)["elicit-1"]["params"]
    assert asked["message"] == "Pickup for order A-1"
    assert asked["requestedSchema"] == {
        "type": "object",
        "properties": {
            "email": {"type": "string", "title": "Email", "format": "email",
                      "description": "Where the shipping label goes"},
            "boxes": {"type": "integer", "title": "Boxes", "description": "How many boxes",
                      "minimum": 1, "maximum": 5},
            "day": {"type": "string", "title": "Day", "format": "date"},
            "speed": {"type": "string", "title": "Speed", "enum": ["standard", "express"],
                      "default": "standard"},
        },
        "required": ["email", "boxes", "day"],
    }
    assert flow.asked(2)["elicit-1"]["params"]["message"] == (
        "boxes: must be at most 5\n\nPickup for order A-1")
    assert flow.asked(3)["elicit-1"]["params"]["message"].startswith(
        "email: must be a valid email address")


def test_the_handler_receives_a_model_instance() -> None:
    seen: list[object] = []

    @mcp.tool()
    async def inspect_pickup(ctx: Any) -> str:
        """Ask for a pickup and report the answer's type."""
        seen.append(await ctx.elicit("Pickup?", Pickup))
        return "ok"

    try:
        with TestClient(mcp) as client:
            client.call_tool("inspect_pickup", answers={"elicit-1": PICKUP})
    finally:
        del mcp.tables.tools["inspect_pickup"]
    assert isinstance(seen[-1], Pickup) and seen[-1].speed == "standard"


def test_prompt_arguments_are_validated_and_described(client: TestClient) -> None:
    (prompt,) = client.request("prompts/list")["prompts"]
    assert prompt["arguments"] == [
        {"name": "product", "required": True},
        {"name": "stars", "required": True, "description": "The rating to explain"}]
    ok = client.get_prompt("review_request", {"product": "kettle", "stars": "4"})
    assert ok.result["messages"][0]["content"]["text"] == "Write a 4-star review of kettle."
    bad = client.send("prompts/get", {"name": "review_request",
                                      "arguments": {"product": "kettle", "stars": "9"}})
    assert bad["error"] == {"code": -32602, "message": (
        "Invalid arguments: Input should be less than or equal to 5 - at `$.stars`")}


# -- the official `mcp` 1.x client, over real HTTP ------------------------------------------------
OFFICIAL = r'''
import asyncio, json, sys
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.types import ElicitResult

asked = []


async def elicit(context, params):
    asked.append({"message": params.message, "schema": params.requestedSchema})
    boxes = 9 if len(asked) == 1 else 2  # 9 breaks the model's le=5: the server asks again
    return ElicitResult(action="accept", content={
        "email": "ann@example.com", "boxes": boxes, "day": "2026-12-01"})


async def main(url):
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.initialize()
            listed = {t.name: t for t in (await session.list_tools()).tools}
            bad = await session.call_tool("rate", {"product": "kettle", "stars": 9})
            good = await session.call_tool("rate", {"product": "kettle", "stars": 4})
            booked = await session.call_tool("schedule_pickup", {"order_id": "A-1"})
            print(json.dumps({
                "input": listed["rate"].inputSchema, "output": listed["rate"].outputSchema,
                "bad": [bad.isError, bad.content[0].text],
                "good": [good.isError, good.structuredContent],
                "booked": [booked.isError, booked.content[0].text], "asked": asked}))


asyncio.run(main(sys.argv[1]))
'''


@pytest.mark.slow
def test_the_official_client_over_http(mcp1_python: Path, tmp_path: Path) -> None:  # noqa: F811
    script = tmp_path / "official_client.py"
    script.write_text(OFFICIAL)
    port = free_port()
    app = McpApp(Dispatcher(mcp), allowed_hosts=[f"127.0.0.1:{port}"])
    with LiveServer(app, port) as server:
        done = subprocess.run([str(mcp1_python), str(script), f"{server.url}/mcp"],
                              capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    stars = seen["input"]["properties"]["stars"]
    assert (stars["minimum"], stars["maximum"]) == (1, 5)
    assert stars["description"] == "From 1 (poor) to 5 (excellent)"
    assert seen["output"] == Review.model_json_schema(mode="serialization")
    assert seen["bad"] == [True, "Invalid arguments: Input should be less than or equal to 5 - "
                                 "at `$.stars`"]
    assert seen["good"] == [False, {"product": "kettle", "stars": 4, "summary": "****"}]
    assert seen["booked"] == [False, "2 box(es) on 2026-12-01, label to ann@example.com"]
    first, again = seen["asked"]
    assert first["message"] == "Pickup for order A-1"
    assert first["schema"]["properties"]["boxes"]["maximum"] == 5
    assert again["message"] == "boxes: must be at most 5\n\nPickup for order A-1"
