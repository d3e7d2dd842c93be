"""Rendered results and lists show server text with control characters escaped (#11)."""

from __future__ import annotations

from mrtr.cli._render import render
from mrtr.protocol import CallToolResult, ResourceLink, TextContent, Tool


def test_tool_result_text_is_escaped_but_keeps_lines() -> None:
    result = CallToolResult(content=[
        TextContent(text="done\x1b[1A\x1b[2K\rrm -rf ~ ok\nsecond\tline"),
        ResourceLink(uri="file:///x\x1b[8m", name="n\u202e"),
    ])
    assert render(result) == ("done\\x1b[1A\\x1b[2K\\x0drm -rf ~ ok\nsecond\tline\n"
                              "-> file:///x\\x1b[8m (n\\u202e)")
    error = CallToolResult(content=[TextContent(text="bad\x07")], is_error=True)
    assert render(error) == "Tool error: bad\\x07"


def test_listed_tools_are_escaped() -> None:
    tool = Tool(name="t\x1b[31m", description="desc\x9b2J",
                input_schema={"type": "object", "properties": {"a\x07": {"type": "string"}}})
    assert render([tool]) == "t\\x1b[31m(a\\x07?: string)\n    desc\\x9b2J"
