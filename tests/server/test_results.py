"""Shaping handler return values into CallToolResult, GetPromptResult and resource contents."""

from __future__ import annotations

import base64
import datetime as dt
import logging
from typing import Any, TypedDict

import msgspec
import pytest

from mrtr import Server, ToolError
from mrtr.protocol import (
    UNSET,
    BlobResourceContents,
    CallToolResult,
    GetPromptResult,
    ImageContent,
    PromptMessage,
    ReadResourceResult,
    TextContent,
    TextResourceContents,
)
from mrtr.server._results import prompt_result, resource_contents, tool_error, tool_result
from tests.server.wire import WireClient


class Point(msgspec.Struct):
    x: int
    y: int


def texts(result: CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, TextContent)]


def test_tool_result_shapes() -> None:
    assert texts(tool_result("hi", structured=False)) == ["hi"]
    assert tool_result(None, structured=False).content == []
    image = ImageContent(data="AA==", mime_type="image/png")
    assert tool_result(image, structured=False).content == [image]
    assert tool_result([image, TextContent(text="t")], structured=False).content[0] == image
    ready = CallToolResult(content=[])
    assert tool_result(ready, structured=True) is ready


def test_tool_result_json_and_structured() -> None:
    plain = tool_result(Point(x=1, y=2), structured=False)
    assert texts(plain) == ['{"x":1,"y":2}'] and plain.structured_content is UNSET
    structured = tool_result(Point(x=1, y=2), structured=True)
    assert structured.structured_content == {"x": 1, "y": 2}
    assert texts(tool_result([1, 2], structured=False)) == ["[1,2]"]
    assert texts(tool_result([], structured=False)) == ["[]"]


def test_tool_error() -> None:
    error = tool_error("nope")
    assert error.is_error is True and texts(error) == ["nope"]


def test_prompt_result_shapes() -> None:
    result = prompt_result("hi", "desc")
    assert result.description == "desc"
    assert result.messages == [PromptMessage(role="user", content=TextContent(text="hi"))]
    message = PromptMessage(role="assistant", content=TextContent(text="a"))
    assert prompt_result([message, "b"], None).messages[0] == message
    assert prompt_result("x", None).description is UNSET
    ready = GetPromptResult(messages=[])
    assert prompt_result(ready, "d") is ready
    with pytest.raises(TypeError):
        prompt_result(42, None)


def test_resource_contents_shapes() -> None:
    assert resource_contents("t", "u://x", None) == [
        TextResourceContents(uri="u://x", text="t", mime_type="text/plain")]
    blob = resource_contents(b"\x00\x01", "u://b", "image/png")[0]
    assert isinstance(blob, BlobResourceContents)
    assert base64.b64decode(blob.blob) == b"\x00\x01" and blob.mime_type == "image/png"
    json_text = resource_contents({"id": "1"}, "u://j", None)[0]
    assert isinstance(json_text, TextResourceContents)
    assert json_text.text == '{"id":"1"}' and json_text.mime_type == "application/json"
    given = TextResourceContents(uri="u://g", text="g")
    assert resource_contents(given, "u://x", None) == [given]
    assert resource_contents([given, given], "u://x", None) == [given, given]
    assert resource_contents(ReadResourceResult(contents=[given]), "u://x", None) == [given]


# -- what reaches the wire (through the Dispatcher) ------------------------------------------------
class Reading(TypedDict):
    sensor: str
    value: float


def serve_value(value: object, caplog: pytest.LogCaptureFixture,
                annotation: object = Any) -> dict[str, Any]:
    """Call a tool returning `value` (declared as returning `annotation`); the tools/call result."""
    app = Server("results")

    async def give() -> Any:
        return value

    give.__annotations__["return"] = annotation
    app.tool("give")(give)
    with caplog.at_level(logging.ERROR, logger="mrtr.server"), WireClient(app) as client:
        reply = client.send("tools/call", {"name": "give", "arguments": {}})
    assert "error" not in reply, reply  # never a wire error (#11 item 6)
    result: dict[str, Any] = reply["result"]
    return result


UNSERIALISABLE = {
    "object": object(),
    "complex-in-dict": {"z": complex(1, 2)},
    "tuple-keys": {(1, 2): "pair"},
    "lone-surrogate": "bad \ud800 text",
    "block-with-object": TextContent(text=object()),  # type: ignore[arg-type]
    "blocks-with-complex": [TextContent(text="ok"), TextContent(text=1j)],  # type: ignore[arg-type]
    "result-with-object": CallToolResult(content=[], structured_content={"at": object()}),
}


@pytest.mark.parametrize("value", UNSERIALISABLE.values(), ids=UNSERIALISABLE.keys())
def test_unserialisable_result_is_an_error_result(value: object,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    result = serve_value(value, caplog)
    assert result["isError"] is True
    assert result["content"] == [
        {"type": "text", "text": "Tool give returned a result that cannot be serialised."}]
    assert "give returned a result that cannot be serialised" in caplog.text  # reason logged


@pytest.mark.parametrize(("value", "text"), [
    ({3, 1}, "[1,3]"),
    ({"at": dt.datetime(2026, 1, 2, 3, 4, 5)}, '{"at":"2026-01-02T03:04:05"}'),
    (b"\x00\x01", '"AAE="'),
    ({1: "one"}, '{"1":"one"}'),
    ("caf\u00e9", "caf\u00e9"),
])
def test_json_oddities_that_can_be_sent_are_results(value: object, text: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    result = serve_value(value, caplog)
    assert "isError" not in result and result["content"] == [{"type": "text", "text": text}]


def test_structured_content_matching_the_output_schema_is_sent(
        caplog: pytest.LogCaptureFixture) -> None:
    result = serve_value({"sensor": "t1", "value": 2.5}, caplog, Reading)
    assert result["structuredContent"] == {"sensor": "t1", "value": 2.5}
    assert "isError" not in result and caplog.text == ""


@pytest.mark.parametrize(("value", "reason"), [
    ({"sensor": "t1"}, "'value' is a required property"),
    ({"sensor": "t1", "value": "hot"}, "value: 'hot' is not of type 'number'"),
    ([1, 2], "is not of type 'object'"),
    ("just text", "structuredContent is missing"),
    (CallToolResult(content=[], structured_content={"sensor": 7, "value": 1}),
     "sensor: 7 is not of type 'string'"),
])
def test_structured_content_not_matching_the_output_schema_is_an_error_result(
        value: object, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    result = serve_value(value, caplog, Reading)  # TOOL-02
    assert result["isError"] is True and "structuredContent" not in result
    text = "Tool give returned a result that does not match its output schema."
    assert result["content"] == [{"type": "text", "text": text}]
    assert "does not match its outputSchema" in caplog.text and reason in caplog.text


def test_tool_failures_keep_their_message_under_an_output_schema(
        caplog: pytest.LogCaptureFixture) -> None:
    app = Server("results")

    @app.tool()
    async def failing() -> Reading:
        raise ToolError("sensor offline")

    with WireClient(app) as client:
        result = client.request("tools/call", {"name": "failing", "arguments": {}})
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "sensor offline"}]
