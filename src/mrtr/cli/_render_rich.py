"""Results for a person at a terminal: listings as tables, tool results in panels (rich)."""

# Design: the layout is rich's, the words are `_render`'s: every text from the server goes
# through `escape` first and reaches rich as a `Text` (never markup), so `[bold]` from a server
# stays literal and no control character reaches the terminal. Anything without a better layout
# is the plain text of `render`.
from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mrtr.protocol import CallToolResult, Prompt, Resource, ResourceTemplate, Tool

from ._escape import escape
from ._render import _kind, render

__all__ = ["show"]


def show(result: object, console: Console) -> None:
    """Print `result` on `console`: a table, a panel or plain text."""
    console.print(_layout(result))


def _layout(result: object) -> RenderableType:
    if isinstance(result, list) and result:
        table = _listing(result)
        if table is not None:
            return table
    if isinstance(result, CallToolResult):
        return _panel(result)
    return Text(render(result))


def _listing(items: Sequence[object]) -> Table | None:
    if all(isinstance(i, Tool) for i in items):
        table = _table("tool", "parameters", "description")
        for tool in items:
            assert isinstance(tool, Tool)
            table.add_row(*map(_cell, (tool.name, _params(tool), tool.description)))
        return table
    if all(isinstance(i, Prompt | Resource | ResourceTemplate) for i in items):
        table = _table("name", "uri", "description")
        for item in items:
            uri = getattr(item, "uri", None) or getattr(item, "uri_template", "")
            table.add_row(*map(_cell, (getattr(item, "name", ""), uri,
                                       getattr(item, "description", ""))))
        return table
    return None


def _table(*columns: str) -> Table:
    table = Table(show_lines=False, header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _cell(value: object) -> Text:
    return Text(escape(value) if isinstance(value, str) else "")


def _params(tool: Tool) -> str:
    props = tool.input_schema.get("properties") or {}
    required = set(tool.input_schema.get("required") or [])
    return ", ".join(f"{n}{'' if n in required else '?'}: {_kind(p)}"
                     for n, p in props.items() if isinstance(p, dict))


def _panel(result: CallToolResult) -> RenderableType:
    failed = result.is_error is True
    data = result.structured_content
    body: RenderableType = Text(render(result).removeprefix("Tool error: "))
    if not failed and isinstance(data, Mapping) and data and not result.content:
        body = _fields(data)
    return Panel(body, title="tool error" if failed else "result", title_align="left",
                 border_style="red" if failed else "green", expand=False)


def _fields(data: Mapping[str, object]) -> Table:
    """Structured content as a two-column table of its top-level fields."""
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in data.items():
        shown = escape(value) if isinstance(value, str) else render(value)
        table.add_row(Text(escape(str(key))), Text(shown))
    return table
