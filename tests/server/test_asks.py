"""Asks: capability matching (DIGEST §2.6), answer decoding and re-ask messages."""

from __future__ import annotations

from typing import Any

import pytest

from mrtr.protocol import (
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestParams,
    ListRootsRequest,
    SamplingMessage,
    TextContent,
    Tool,
)
from mrtr.server._asks import (
    Declined,
    Reask,
    capability_missing,
    decode_elicit,
    decode_roots,
    decode_sample,
    form_spec,
    required_capability,
    shape_of,
)

FORM: dict[str, object] = {"elicitation": {"form": {}}}
URL: dict[str, object] = {"elicitation": {"url": {}}}


@pytest.mark.parametrize(("declared", "needed", "missing"), [
    ({"elicitation": {}}, FORM, False),
    ({"elicitation": {"form": {}}}, FORM, False),
    ({"elicitation": {"url": {}}}, FORM, True),
    ({"elicitation": {}}, URL, True),
    ({"elicitation": {"form": {}, "url": {}}}, URL, False),
    ({}, FORM, True),
    ({"sampling": {}}, {"sampling": {}}, False),
    ({"sampling": {}}, {"sampling": {"tools": {}}}, True),
    ({"sampling": {"tools": {}}}, {"sampling": {"tools": {}}}, False),
    ({"roots": {"listChanged": True}}, {"roots": {}}, False),
    ({"sampling": {}}, {"roots": {}}, True),
    ({"elicitation": True}, FORM, True),
    (None, {"roots": {}}, True),
])
def test_capability_missing(declared: Any, needed: dict[str, object], missing: bool) -> None:
    assert capability_missing(declared, needed) is missing


def test_capability_missing_accepts_structs() -> None:
    assert not capability_missing(ClientCapabilities(roots={}), {"roots": {}})
    assert capability_missing(ClientCapabilities(), {"roots": {}})


def test_required_capability() -> None:
    form = ElicitRequest(params=ElicitRequestParams(message="m", requested_schema={}))
    url = ElicitRequest(params=ElicitRequestParams(mode="url", message="m", url="https://x"))
    msg = [SamplingMessage(role="user", content=TextContent(text="x"))]
    plain = CreateMessageRequest(params=CreateMessageRequestParams(messages=msg, max_tokens=1))
    tools = CreateMessageRequest(params=CreateMessageRequestParams(
        messages=msg, max_tokens=1, tools=[Tool(name="t", input_schema={"type": "object"})]))
    assert required_capability(form) == FORM
    assert required_capability(url) == URL
    assert required_capability(plain) == {"sampling": {}}
    assert required_capability(tools) == {"sampling": {"tools": {}}}
    assert required_capability(ListRootsRequest()) == {"roots": {}}


@pytest.mark.parametrize("raw", [12345, None, "x", [], {"action": "maybe"},
                                 {"action": "accept", "content": 3}])
def test_malformed_elicit_answers_reask(raw: object) -> None:
    with pytest.raises(Reask, match="malformed"):
        decode_elicit(raw)


def test_decoders() -> None:
    assert decode_elicit({"action": "decline"}).action == "decline"
    roots = decode_roots({"roots": [{"uri": "file:///a"}]})
    assert [r.uri for r in roots] == ["file:///a"]
    sample = decode_sample({"role": "assistant", "content": {"type": "text", "text": "t"},
                            "model": "m"})
    assert sample.model == "m"
    with pytest.raises(Reask):
        decode_sample({"roots": []})
    with pytest.raises(Reask):
        decode_roots({"roots": "nope"})


def test_shape_depends_on_method_and_detail() -> None:
    assert shape_of("a", {"x": 1, "y": 2}) == shape_of("a", {"y": 2, "x": 1})
    assert shape_of("a", 1) != shape_of("b", 1) and len(shape_of("a", None)) == 16
    assert form_spec("m", {}, "d").capability == FORM


def test_declined_message() -> None:
    assert str(Declined("decline", "Go?")) == "The user declined the request: Go?"
    assert Declined("cancel", "Go?").action == "cancel"
