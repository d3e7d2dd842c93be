"""Turn what a handler returned into the wire result of its method."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Sequence

import msgspec

from mrtr.errors import MrtrError
from mrtr.protocol import (
    UNSET,
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    PromptMessage,
    ReadResourceResult,
    ResourceLink,
    TextContent,
    TextResourceContents,
    UnsetType,
)
from mrtr.server._pydantic import encode_model

__all__ = [
    "ToolError",
    "checked_tool_result",
    "prompt_result",
    "resource_contents",
    "tool_error",
    "tool_result",
]

Dump = Callable[[object], tuple[object, object]]  # value → (JSON for the text, structuredContent)
_BLOCKS = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)
_JSON = msgspec.json.Encoder()


class ToolError(MrtrError):
    """Raise from a tool to report a failure to the model as an `isError: true` result.

    The message is sent as is; other exceptions are reported with a generic text and logged.
    """


def tool_error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


def checked_tool_result(
    name: str,
    value: object,
    check: Callable[[object], str | None] | None,
    log: logging.Logger,
    dump: Dump | None = None,
    meta: dict[str, object] | UnsetType = UNSET,
) -> CallToolResult:
    """`tool_result`, with values JSON cannot carry and structuredContent that does not match
    the tool's outputSchema (TOOL-02: `check`) turned into `isError` results; reasons logged."""
    try:
        result = tool_result(value, structured=check is not None, dump=dump, meta=meta)
    except (TypeError, ValueError, msgspec.EncodeError) as exc:
        log.error("tool %s returned a result that cannot be serialised: %s", name, exc)
        return tool_error(f"Tool {name} returned a result that cannot be serialised.")
    if check is None or result.is_error is True:
        return result
    if result.structured_content is UNSET:
        problem: str | None = "structuredContent is missing"
    else:
        problem = check(result.structured_content)
    if problem is not None:
        log.error("tool %s returned a result that does not match its outputSchema: %s",
                  name, problem)
        return tool_error(f"Tool {name} returned a result that does not match its output schema.")
    return result


def tool_result(value: object, *, structured: bool, dump: Dump | None = None,
                meta: dict[str, object] | UnsetType = UNSET) -> CallToolResult:
    """Content for `value`: text, a content block or list of them, or JSON (+ structuredContent).

    `dump` (a pydantic return type's) gives the JSON of the text and the structuredContent;
    without it msgspec's `to_builtins` gives both. Raises TypeError or ValueError
    (UnicodeEncodeError, pydantic's serialisation errors) when `value` cannot be sent as JSON.
    `meta` is the `_meta` of a result built here (a CallToolResult the handler built keeps its
    own: the caller fills it, so the handler's object is never changed).
    """
    if isinstance(value, str):
        if not value.isascii():
            value.encode()  # a lone surrogate cannot be sent; ASCII (the common case) always can
        return CallToolResult(content=[TextContent(text=value)], meta=meta)
    if value is None:
        return CallToolResult(content=[], meta=meta)
    if isinstance(value, CallToolResult):
        _JSON.encode(value)  # built by the handler: any field may hold what JSON cannot carry
        return value
    if isinstance(value, _BLOCKS):
        _JSON.encode(value)
        return CallToolResult(content=[value])
    if isinstance(value, list | tuple) and value and all(isinstance(v, _BLOCKS) for v in value):
        _JSON.encode(value)
        return CallToolResult(content=list(value))
    if dump is not None:
        data, content = dump(value)
        text = _JSON.encode(data).decode()
        return CallToolResult(content=[TextContent(text=text)], structured_content=content)
    try:
        data = msgspec.to_builtins(value)
    except TypeError:  # a pydantic model the annotation did not announce, or a mistake
        data = msgspec.to_builtins(value, enc_hook=encode_model)
    text = _JSON.encode(data).decode()
    if structured:
        return CallToolResult(content=[TextContent(text=text)], structured_content=data)
    return CallToolResult(content=[TextContent(text=text)])


def prompt_result(value: object, description: str | None) -> GetPromptResult:
    """Messages for `value`: a string (one user message), PromptMessages, or a full result."""
    if isinstance(value, GetPromptResult):
        return value
    items: Sequence[object] = value if isinstance(value, list | tuple) else [value]
    messages: list[PromptMessage] = []
    for item in items:
        if isinstance(item, PromptMessage):
            messages.append(item)
        elif isinstance(item, str):
            messages.append(PromptMessage(role="user", content=TextContent(text=item)))
        elif isinstance(item, _BLOCKS):
            messages.append(PromptMessage(role="user", content=item))
        else:
            raise TypeError(f"a prompt cannot return {type(item).__name__}")
    return GetPromptResult(
        messages=messages, description=description if description is not None else UNSET
    )


def resource_contents(
    value: object, uri: str, mime_type: str | None
) -> list[TextResourceContents | BlobResourceContents]:
    """Contents for `value`: text, bytes (sent as a blob), or contents objects."""
    if isinstance(value, ReadResourceResult):
        return list(value.contents)
    if isinstance(value, TextResourceContents | BlobResourceContents):
        return [value]
    if isinstance(value, list) and all(
        isinstance(v, TextResourceContents | BlobResourceContents) for v in value
    ):
        return list(value)
    if isinstance(value, bytes):
        blob = base64.b64encode(value).decode()
        return [BlobResourceContents(uri=uri, blob=blob, mime_type=mime_type or UNSET)]
    if isinstance(value, str):
        return [TextResourceContents(uri=uri, text=value, mime_type=mime_type or "text/plain")]
    try:
        data = msgspec.to_builtins(value)
    except TypeError:  # pydantic models: pydantic's JSON
        data = msgspec.to_builtins(value, enc_hook=encode_model)
    text = _JSON.encode(data).decode()
    return [TextResourceContents(uri=uri, text=text, mime_type=mime_type or "application/json")]
