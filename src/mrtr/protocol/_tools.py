"""Tools: the Tool entity, `tools/list` and `tools/call`."""

from __future__ import annotations

from typing import Literal

import msgspec

from ._content import ContentBlock
from ._jsonrpc import CacheScope, MethodTagged, PaginatedRequestParams, Result
from ._meta import Icon, RequestId, RequestMeta
from ._wire import JSON, UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "CallToolRequest",
    "CallToolRequestParams",
    "CallToolResult",
    "ListToolsRequest",
    "ListToolsResult",
    "Tool",
    "ToolAnnotations",
]


class ToolAnnotations(Wire, frozen=True, kw_only=True):
    """Untrusted hints about a tool's behaviour."""

    title: str | UnsetType = UNSET
    read_only_hint: bool | UnsetType = UNSET
    destructive_hint: bool | UnsetType = UNSET
    idempotent_hint: bool | UnsetType = UNSET
    open_world_hint: bool | UnsetType = UNSET


class Tool(Wire, frozen=True, kw_only=True):
    """A tool the server offers; `input_schema` is a JSON Schema object (2020-12 by default)."""

    name: str
    input_schema: JSONObject
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    output_schema: JSONObject | UnsetType = UNSET
    annotations: ToolAnnotations | UnsetType = UNSET
    execution: JSONObject | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ListToolsRequest(
    MethodTagged, tag_field="method", tag="tools/list", frozen=True, kw_only=True
):
    """`tools/list`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: PaginatedRequestParams


class ListToolsResult(Result, frozen=True, kw_only=True):
    """One page of tools (cacheable: `ttl_ms` defaults to 0 and `cache_scope` to private)."""

    tools: list[Tool]
    next_cursor: str | UnsetType = UNSET
    ttl_ms: int = 0
    cache_scope: CacheScope = "private"


class CallToolRequestParams(Wire, frozen=True, kw_only=True):
    """Params of `tools/call`, including the MRTR retry fields."""

    name: str
    arguments: JSONObject | UnsetType = UNSET
    input_responses: dict[str, JSONObject] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET
    meta: RequestMeta = msgspec.field(name="_meta")


class CallToolRequest(
    MethodTagged, tag_field="method", tag="tools/call", frozen=True, kw_only=True
):
    """`tools/call`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: CallToolRequestParams


class CallToolResult(Result, frozen=True, kw_only=True):
    """A tool's outcome; tool failures set `is_error`, they are never wire errors."""

    content: list[ContentBlock]
    structured_content: JSON | UnsetType = UNSET
    is_error: bool | UnsetType = UNSET
