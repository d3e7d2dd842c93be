"""MRTR: input requests (elicitation, sampling, roots), their responses, InputRequiredResult."""

# Design: form and URL elicitation share one params Struct because `mode` is optional for form
# mode, so the two cannot be told apart by a tag. `ElicitRequestFormParams(...)` and
# `ElicitRequestURLParams(...)` are constructors that build it the spec's two ways.
from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from ._content import SamplingMessageContentBlock
from ._jsonrpc import MethodTagged, Result
from ._meta import Role
from ._tools import Tool
from ._wire import UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "CreateMessageRequest",
    "CreateMessageRequestParams",
    "CreateMessageResult",
    "ElicitRequest",
    "ElicitRequestFormParams",
    "ElicitRequestParams",
    "ElicitRequestURLParams",
    "ElicitResult",
    "ElicitValue",
    "InputRequest",
    "InputRequiredResult",
    "InputResponse",
    "ListRootsRequest",
    "ListRootsResult",
    "ModelHint",
    "ModelPreferences",
    "Root",
    "SamplingMessage",
    "ToolChoice",
]


class ElicitRequestParams(Wire, frozen=True, kw_only=True):
    """Form mode (`mode` absent or "form", with `requested_schema`) or URL mode (`url`)."""

    mode: Literal["form", "url"] | UnsetType = UNSET
    message: str
    requested_schema: JSONObject | UnsetType = UNSET
    url: str | UnsetType = UNSET


def ElicitRequestFormParams(
    *, message: str, requested_schema: JSONObject, explicit_mode: bool = True
) -> ElicitRequestParams:
    """Form-mode params; `explicit_mode=False` leaves `mode` out (still form mode)."""
    mode: Literal["form"] | UnsetType = "form" if explicit_mode else UNSET
    return ElicitRequestParams(mode=mode, message=message, requested_schema=requested_schema)


def ElicitRequestURLParams(*, message: str, url: str) -> ElicitRequestParams:
    """URL-mode params: the client opens `url` after the user consents."""
    return ElicitRequestParams(mode="url", message=message, url=url)


class ElicitRequest(
    MethodTagged, tag_field="method", tag="elicitation/create", frozen=True, kw_only=True
):
    """Ask the user for input (an MRTR input request: no jsonrpc, no id)."""

    params: ElicitRequestParams


ElicitValue: TypeAlias = str | int | float | bool | list[str]


class ElicitResult(Wire, frozen=True, kw_only=True):
    """The user's answer; `content` only for accept in form mode."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, ElicitValue] | UnsetType = UNSET


class SamplingMessage(Wire, frozen=True, kw_only=True):
    """One message of a sampling conversation."""

    role: Role
    content: SamplingMessageContentBlock | list[SamplingMessageContentBlock]
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ModelHint(Wire, frozen=True, kw_only=True):
    """A model-name substring hint."""

    name: str | UnsetType = UNSET


class ModelPreferences(Wire, frozen=True, kw_only=True):
    """Advisory model selection preferences (priorities in 0..1)."""

    hints: list[ModelHint] | UnsetType = UNSET
    cost_priority: float | UnsetType = UNSET
    speed_priority: float | UnsetType = UNSET
    intelligence_priority: float | UnsetType = UNSET


class ToolChoice(Wire, frozen=True, kw_only=True):
    """How the model may use the offered tools."""

    mode: Literal["auto", "required", "none"] | UnsetType = UNSET


class CreateMessageRequestParams(Wire, frozen=True, kw_only=True):
    """Params of `sampling/createMessage`; `tools`/`tool_choice` need `sampling.tools`."""

    messages: list[SamplingMessage]
    max_tokens: int
    system_prompt: str | UnsetType = UNSET
    include_context: Literal["none", "thisServer", "allServers"] | UnsetType = UNSET
    temperature: float | UnsetType = UNSET
    stop_sequences: list[str] | UnsetType = UNSET
    metadata: JSONObject | UnsetType = UNSET
    model_preferences: ModelPreferences | UnsetType = UNSET
    tools: list[Tool] | UnsetType = UNSET
    tool_choice: ToolChoice | UnsetType = UNSET


class CreateMessageRequest(
    MethodTagged, tag_field="method", tag="sampling/createMessage", frozen=True, kw_only=True
):
    """Ask the client to sample an LLM (an MRTR input request)."""

    params: CreateMessageRequestParams


class CreateMessageResult(Wire, frozen=True, kw_only=True):
    """The client's sampled message."""

    role: Role
    content: SamplingMessageContentBlock | list[SamplingMessageContentBlock]
    model: str
    stop_reason: str | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ListRootsRequest(
    MethodTagged, tag_field="method", tag="roots/list", frozen=True, kw_only=True
):
    """Ask the client for its roots (an MRTR input request)."""

    params: JSONObject | UnsetType = UNSET


class Root(Wire, frozen=True, kw_only=True):
    """A `file://` root the client exposes."""

    uri: str
    name: str | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ListRootsResult(Wire, frozen=True, kw_only=True):
    """The client's roots."""

    roots: list[Root]


InputRequest: TypeAlias = ElicitRequest | CreateMessageRequest | ListRootsRequest
InputResponse: TypeAlias = ElicitResult | CreateMessageResult | ListRootsResult


class InputRequiredResult(Result, frozen=True, kw_only=True):
    """Ask the client to retry with answers; at least one of the two fields must be set."""

    result_type: str = "input_required"
    input_requests: dict[str, InputRequest] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET
