"""Tools: the Tool entity, `tools/list` and `tools/call` (with its optional idempotency key)."""

# Design: `idempotencyKey` is the SEP-3182 proposal's field (a closed PR on the spec repository,
# not in the 2026-07-28 schema, whose params objects allow extra members). It is bounded here, at
# decode: 1 to 255 visible ASCII characters, so a key is a short opaque token the server can store
# and log; anything else is -32602 before a handler runs. A server declares the feature with
# `tools: {"idempotency": {}}` (IDEMPOTENCY_CAPABILITY) in its capabilities.
from __future__ import annotations

import re
from typing import Annotated, Literal

import msgspec

from ._content import ContentBlock
from ._jsonrpc import CacheScope, MethodTagged, PaginatedRequestParams, Result
from ._meta import Icon, RequestId, RequestMeta
from ._wire import JSON, UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "IDEMPOTENCY_CAPABILITY",
    "MAX_IDEMPOTENCY_KEY_LENGTH",
    "CallToolRequest",
    "CallToolRequestParams",
    "CallToolResult",
    "ListToolsRequest",
    "ListToolsResult",
    "Tool",
    "IdempotencyKey",
    "ToolAnnotations",
    "idempotency_declared",
    "valid_idempotency_key",
]

IDEMPOTENCY_CAPABILITY = "idempotency"  # the key under `capabilities.tools`
MAX_IDEMPOTENCY_KEY_LENGTH = 255
_KEY_PATTERN = r"^[!-~]+\Z"  # visible ASCII: no spaces, no control characters (\Z: no "\n")
IdempotencyKey = Annotated[
    str, msgspec.Meta(min_length=1, max_length=MAX_IDEMPOTENCY_KEY_LENGTH, pattern=_KEY_PATTERN)
]
_KEY = re.compile(_KEY_PATTERN)


def valid_idempotency_key(key: object) -> bool:
    """Whether `key` is a well-formed `idempotencyKey` (1 to 255 visible ASCII characters)."""
    return (isinstance(key, str) and 0 < len(key) <= MAX_IDEMPOTENCY_KEY_LENGTH
            and _KEY.match(key) is not None)


def idempotency_declared(tools: object) -> bool:
    """Whether a server's `capabilities.tools` object declares `idempotency`."""
    return isinstance(tools, dict) and isinstance(tools.get(IDEMPOTENCY_CAPABILITY), dict)


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
    # Names one logical call across retries and MRTR rounds (docs/deploy.md, "Idempotency keys").
    idempotency_key: IdempotencyKey | UnsetType = UNSET
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
