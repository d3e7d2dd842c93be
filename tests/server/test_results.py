"""Shaping handler return values into CallToolResult, GetPromptResult and resource contents."""

from __future__ import annotations

import base64

import msgspec
import pytest

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
