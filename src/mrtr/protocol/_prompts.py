"""Prompts: the Prompt entity, `prompts/list` and `prompts/get`."""

from __future__ import annotations

from typing import Literal

import msgspec

from ._content import ContentBlock
from ._jsonrpc import CacheScope, MethodTagged, PaginatedRequestParams, Result
from ._meta import Icon, RequestId, RequestMeta, Role
from ._wire import UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "GetPromptRequest",
    "GetPromptRequestParams",
    "GetPromptResult",
    "ListPromptsRequest",
    "ListPromptsResult",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
]


class PromptArgument(Wire, frozen=True, kw_only=True):
    """An argument a prompt accepts."""

    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    required: bool | UnsetType = UNSET


class Prompt(Wire, frozen=True, kw_only=True):
    """A prompt or prompt template the server offers."""

    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    arguments: list[PromptArgument] | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class PromptMessage(Wire, frozen=True, kw_only=True):
    """One message of a prompt."""

    role: Role
    content: ContentBlock


class ListPromptsRequest(
    MethodTagged, tag_field="method", tag="prompts/list", frozen=True, kw_only=True
):
    """`prompts/list`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: PaginatedRequestParams


class ListPromptsResult(Result, frozen=True, kw_only=True):
    """One page of prompts (cacheable)."""

    prompts: list[Prompt]
    next_cursor: str | UnsetType = UNSET
    ttl_ms: int = 0
    cache_scope: CacheScope = "private"


class GetPromptRequestParams(Wire, frozen=True, kw_only=True):
    """Params of `prompts/get`, including the MRTR retry fields."""

    name: str
    arguments: dict[str, str] | UnsetType = UNSET
    input_responses: dict[str, JSONObject] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET
    meta: RequestMeta = msgspec.field(name="_meta")


class GetPromptRequest(
    MethodTagged, tag_field="method", tag="prompts/get", frozen=True, kw_only=True
):
    """`prompts/get`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: GetPromptRequestParams


class GetPromptResult(Result, frozen=True, kw_only=True):
    """A rendered prompt."""

    messages: list[PromptMessage]
    description: str | UnsetType = UNSET
