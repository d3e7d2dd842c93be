"""`completion/complete`: argument completion for prompts and resource templates."""

from __future__ import annotations

from typing import Literal

import msgspec

from ._jsonrpc import MethodTagged, Result, TypeTagged
from ._meta import RequestId, RequestMeta
from ._wire import UNSET, UnsetType, Wire

__all__ = [
    "CompleteRequest",
    "CompleteRequestParams",
    "CompleteResult",
    "Completion",
    "CompletionArgument",
    "CompletionContext",
    "PromptReference",
    "ResourceTemplateReference",
]


class PromptReference(TypeTagged, tag_field="type", tag="ref/prompt", frozen=True, kw_only=True):
    """Identifies a prompt."""

    name: str
    title: str | UnsetType = UNSET


class ResourceTemplateReference(
    TypeTagged, tag_field="type", tag="ref/resource", frozen=True, kw_only=True
):
    """Identifies a resource template by its URI template."""

    uri: str


class CompletionArgument(Wire, frozen=True, kw_only=True):
    """The argument being completed and its partial value."""

    name: str
    value: str


class CompletionContext(Wire, frozen=True, kw_only=True):
    """Already-resolved arguments."""

    arguments: dict[str, str] | UnsetType = UNSET


class CompleteRequestParams(Wire, frozen=True, kw_only=True):
    """Params of `completion/complete`."""

    ref: PromptReference | ResourceTemplateReference
    argument: CompletionArgument
    context: CompletionContext | UnsetType = UNSET
    meta: RequestMeta = msgspec.field(name="_meta")


class CompleteRequest(
    MethodTagged, tag_field="method", tag="completion/complete", frozen=True, kw_only=True
):
    """`completion/complete`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: CompleteRequestParams


class Completion(Wire, frozen=True, kw_only=True):
    """Up to 100 completion values."""

    values: list[str]
    total: int | UnsetType = UNSET
    has_more: bool | UnsetType = UNSET


class CompleteResult(Result, frozen=True, kw_only=True):
    """The result of `completion/complete`."""

    completion: Completion
