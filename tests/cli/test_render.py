"""Rendered results and lists show server text with control characters escaped (#11)."""

from __future__ import annotations

from mrtr.cli._render import render
from mrtr.protocol import (
    CallToolResult,
    Prompt,
    PromptArgument,
    ResourceLink,
    TextContent,
    Tool,
)


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


def test_listed_tools_show_choices_in_order_and_unions_issue19() -> None:
    schema = {"type": "object", "required": ["team"], "properties": {
        "team": {"enum": ["red", "blue"]}, "note": {"anyOf": [{"type": "string"},
                                                              {"type": "null"}]},
        "n": {"type": ["integer", "null"]}, "mode": {"const": "fast"}, "x": {}}}
    tool = Tool(name="sign_up", input_schema=schema)
    assert render([tool]) == ('sign_up(team: "red"|"blue", note?: string|null, '
                              'n?: integer|null, mode?: "fast", x?: any)')


def test_listed_prompts_mark_optional_arguments_issue19() -> None:
    prompt = Prompt(name="welcome", arguments=[PromptArgument(name="name", required=True),
                                               PromptArgument(name="tone", required=False),
                                               PromptArgument(name="style")])
    assert render([prompt]) == "welcome(name, tone?, style?)"
