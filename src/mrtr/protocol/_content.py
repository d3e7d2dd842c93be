"""Content blocks (tagged by `type`) and resource contents."""

# Design: `TextResourceContents | BlobResourceContents` is an untagged union of two objects, which
# msgspec cannot decode directly. Type checkers see `ResourceContents` as exactly that union; at
# run time it is an ABC both classes are registered with (so isinstance works), which msgspec
# treats as a custom type resolved by `resolve_contents`: an object with "blob" is
# BlobResourceContents, anything else TextResourceContents. Encoding needs nothing special.
# Decode through `mrtr.protocol` decoders (they all pass `resolve_contents` as `dec_hook`).
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, TypeAlias, cast

import msgspec

from ._jsonrpc import TypeTagged
from ._meta import Icon, Role
from ._wire import JSON, UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "Annotations",
    "AudioContent",
    "BlobResourceContents",
    "ContentBlock",
    "EmbeddedResource",
    "ImageContent",
    "ResourceContents",
    "ResourceLink",
    "SamplingMessageContentBlock",
    "TextContent",
    "TextResourceContents",
    "ToolResultContent",
    "ToolUseContent",
    "resolve_contents",
]


class Annotations(Wire, frozen=True, kw_only=True):
    """Hints for the client about audience, priority (0..1) and freshness."""

    audience: list[Role] | UnsetType = UNSET
    priority: float | UnsetType = UNSET
    last_modified: str | UnsetType = UNSET


class TextResourceContents(Wire, frozen=True, kw_only=True):
    """The text of a resource."""

    uri: str
    text: str
    mime_type: str | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class BlobResourceContents(Wire, frozen=True, kw_only=True):
    """The base64-encoded bytes of a resource."""

    uri: str
    blob: str
    mime_type: str | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


if TYPE_CHECKING:
    ResourceContents: TypeAlias = TextResourceContents | BlobResourceContents
else:

    class ResourceContents(abc.ABC):  # noqa: B024 - a virtual union: nothing to implement
        """`TextResourceContents | BlobResourceContents` at run time (see Design above)."""

    ResourceContents.register(TextResourceContents)
    ResourceContents.register(BlobResourceContents)


def resolve_contents(type_: type, obj: object) -> object:
    """msgspec `dec_hook`: pick the resource-contents class of a decoded object by its keys.

    Raises ValueError (reported by msgspec with the path) if the object does not fit.
    """
    if type_ is not cast(object, ResourceContents):
        raise NotImplementedError(type_)
    target = (
        BlobResourceContents if isinstance(obj, dict) and "blob" in obj else TextResourceContents
    )
    try:
        return msgspec.convert(obj, target)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None


class TextContent(TypeTagged, tag_field="type", tag="text", frozen=True, kw_only=True):
    """Plain text."""

    text: str
    annotations: Annotations | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ImageContent(TypeTagged, tag_field="type", tag="image", frozen=True, kw_only=True):
    """A base64-encoded image."""

    data: str
    mime_type: str
    annotations: Annotations | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class AudioContent(TypeTagged, tag_field="type", tag="audio", frozen=True, kw_only=True):
    """Base64-encoded audio."""

    data: str
    mime_type: str
    annotations: Annotations | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ResourceLink(TypeTagged, tag_field="type", tag="resource_link", frozen=True, kw_only=True):
    """A link to a resource the client may read."""

    uri: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    size: int | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class EmbeddedResource(TypeTagged, tag_field="type", tag="resource", frozen=True, kw_only=True):
    """Resource contents embedded in a message."""

    resource: ResourceContents
    annotations: Annotations | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


ContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource
)


class ToolUseContent(TypeTagged, tag_field="type", tag="tool_use", frozen=True, kw_only=True):
    """A model's request to call a tool (sampling only)."""

    id: str
    name: str
    input: JSONObject
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ToolResultContent(TypeTagged, tag_field="type", tag="tool_result", frozen=True, kw_only=True):
    """The result of a tool call fed back to the model (sampling only)."""

    tool_use_id: str
    content: list[ContentBlock]
    structured_content: JSON | UnsetType = UNSET
    is_error: bool | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


SamplingMessageContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ToolUseContent | ToolResultContent
)
