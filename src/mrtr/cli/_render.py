"""Plain-text rendering of results and log messages for `mrtr call` (server text escaped)."""

from __future__ import annotations

import json
from typing import get_args

import msgspec

from mrtr.protocol import (
    UNSET,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    GetPromptResult,
    LoggingLevel,
    LoggingMessageNotificationParams,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceLink,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    Tool,
)

from ._escape import escape

__all__ = ["LEVELS", "log_line", "render"]

LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)  # lowest first


def render(result: object) -> str:
    """A human-readable text for a result or a list of listed items.

    Control and invisible format characters from the server are shown as escapes.
    """
    return escape(_text(result))


def log_line(params: LoggingMessageNotificationParams) -> str:
    """One server log message as one line: `[info] carrier: Booked` (data that is not text as
    compact JSON; everything from the server escaped, newlines too)."""
    data = params.data
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    source = f"{params.logger}: " if isinstance(params.logger, str) and params.logger else ""
    return escape(f"[{params.level}] {source}{text}", newlines=False)


def _text(result: object) -> str:
    if isinstance(result, list):
        return "\n".join(_item(x) for x in result) if result else "(none)"
    if isinstance(result, CallToolResult):
        lines = [_block(b) for b in result.content]
        if result.structured_content is not UNSET and not lines:
            lines.append(json.dumps(result.structured_content, indent=2, ensure_ascii=False))
        text = "\n".join(lines)
        return f"Tool error: {text}" if result.is_error is True else text
    if isinstance(result, GetPromptResult):
        return "\n".join(f"[{m.role}] {_block(m.content)}" for m in result.messages)
    if isinstance(result, ReadResourceResult):
        return "\n".join(_contents(c) for c in result.contents)
    return msgspec.json.format(msgspec.json.encode(result), indent=2).decode("utf-8")


def _item(item: object) -> str:
    if isinstance(item, Tool):
        props = item.input_schema.get("properties") or {}
        required = set(item.input_schema.get("required") or [])
        args = ", ".join(
            f"{n}{'' if n in required else '?'}: {_kind(p)}"
            for n, p in props.items() if isinstance(p, dict)
        )
        return f"{item.name}({args})" + _about(item.description)
    if isinstance(item, Prompt):
        listed = item.arguments if item.arguments is not UNSET else []
        names = [a.name + ("" if a.required is True else "?") for a in listed]
        return f"{item.name}({', '.join(names)})" + _about(item.description)
    if isinstance(item, Resource):
        return f"{item.uri}  {item.name}" + _about(item.description)
    if isinstance(item, ResourceTemplate):
        return f"{item.uri_template}  {item.name} (template)" + _about(item.description)
    return str(item)


def _kind(prop: dict[str, object]) -> str:
    """A parameter's type as a short text: `string`, `"red"|"blue"`, `integer|null`, `any`."""
    values = prop.get("enum")
    if isinstance(values, list) and values:
        return "|".join(json.dumps(v, ensure_ascii=False) for v in values)
    if "const" in prop:
        return json.dumps(prop["const"], ensure_ascii=False)
    declared = prop.get("type")
    if isinstance(declared, str):
        return declared
    if isinstance(declared, list) and declared:
        return "|".join(str(t) for t in declared)
    options = [o for k in ("anyOf", "oneOf") for o in _options(prop.get(k))]
    return "|".join(_kind(o) for o in options) if options else "any"


def _options(value: object) -> list[dict[str, object]]:
    return [o for o in value if isinstance(o, dict)] if isinstance(value, list) else []


def _about(description: str | object) -> str:
    return f"\n    {description}" if isinstance(description, str) and description else ""


def _block(block: object) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ResourceLink):
        return f"-> {block.uri} ({block.name})"
    if isinstance(block, EmbeddedResource):
        return _contents(block.resource)
    mime = getattr(block, "mime_type", "")
    return f"[{type(block).__name__} {mime}]"


def _contents(contents: object) -> str:
    if isinstance(contents, TextResourceContents):
        return contents.text
    if isinstance(contents, BlobResourceContents):
        mime = contents.mime_type if contents.mime_type is not UNSET else "binary"
        return f"[{mime}, {len(contents.blob) * 3 // 4} bytes] {contents.uri}"
    return str(contents)
