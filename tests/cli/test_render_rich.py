"""Results at a terminal: tables for listings, panels for tool results, text escaped (#18)."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console

from mrtr.cli._render_rich import show
from mrtr.protocol import CallToolResult, Prompt, TextContent, Tool
from tests.cli.tty import Tty, check_capture

BOOKINGS = f"{sys.executable} -m mrtr.cli serve examples.bookings:app --stdio"


def shown(result: object) -> str:
    out = io.StringIO()
    show(result, Console(file=out, width=100, force_terminal=False))
    return out.getvalue()


def test_tools_are_a_table_with_hostile_text_literal_issue18() -> None:
    tool = Tool(name="x[red]", description="[bold]hi\x1b[2J", input_schema={
        "type": "object", "required": ["a"],
        "properties": {"a": {"enum": ["p", "q"]}, "b": {"type": "integer"}}})
    text = shown([tool])
    assert "x[red]" in text and "[bold]hi\\x1b[2J" in text and "\x1b" not in text
    assert 'a: "p"|"q", b?: integer' in text
    assert "description" in text.splitlines()[1]


def test_prompts_are_a_table_issue18() -> None:
    assert "welcome" in shown([Prompt(name="welcome", description="Say hi")])


def test_a_tool_result_is_a_panel_and_an_error_says_so_issue18() -> None:
    ok = shown(CallToolResult(content=[TextContent(text="done\x07")]))
    assert "result" in ok.splitlines()[0] and "done\\x07" in ok
    failed = shown(CallToolResult(content=[TextContent(text="disk full")], is_error=True))
    assert "tool error" in failed.splitlines()[0] and "disk full" in failed
    assert "Tool error:" not in failed


def test_structured_content_alone_is_a_field_table_issue18() -> None:
    text = shown(CallToolResult(content=[], structured_content={"rma": "RMA-1", "boxes": 2}))
    assert [line.split() for line in text.splitlines()[1:3]] == [
        ["│", "rma", "RMA-1", "│"], ["│", "boxes", "2", "│"]]


def test_anything_else_is_the_plain_text_issue18() -> None:
    assert shown([]) == "(none)\n"


@pytest.mark.slow
def test_mrtr_tools_at_a_terminal_issue18() -> None:
    term = Tty("tools", "--stdio", BOOKINGS, cols=100)
    assert term.finish() == 0
    assert "│ book_return " in term.screen
    check_capture("tools", term.screen)
