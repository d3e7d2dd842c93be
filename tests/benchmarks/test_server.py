"""benchmarks.server satisfies the shared bench tool contract, driven in process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.server import app
from mrtr.testing import TestClient


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


def test_echo_answers_in_one_round(client: TestClient) -> None:
    flow = client.call_tool("echo", {"text": "hello"})
    assert flow.rounds == 1
    assert flow.result["content"] == [{"type": "text", "text": "hello"}]


def test_greet_asks_one_string(client: TestClient) -> None:
    flow = client.call_tool("greet", {"greeting": "hello"}, answers={"name": {"name": "bench"}})
    assert flow.rounds == 2
    (ask,) = flow.asked(1).values()
    assert ask["method"] == "elicitation/create"
    assert ask["params"]["requestedSchema"]["properties"]["name"]["type"] == "string"
    assert flow.text == "hello, bench"


def test_deploy_asks_string_then_confirmation(client: TestClient) -> None:
    flow = client.call_tool("deploy", {"service": "web"},
                            answers={"target": {"env": "bench"}, "confirm": True})
    assert flow.rounds == 3
    assert [list(flow.asked(n)) for n in (1, 2)] == [["target"], ["confirm"]]
    (confirm,) = flow.asked(2).values()
    props = confirm["params"]["requestedSchema"]["properties"]
    assert [p["type"] for p in props.values()] == ["boolean"]
    assert flow.text == "deployed web to bench"


def test_list_has_the_three_tools(client: TestClient) -> None:
    tools = client.request("tools/list")["tools"]
    assert {t["name"] for t in tools} == {"echo", "greet", "deploy"}
    assert all("inputSchema" in t for t in tools)
