"""Resources: entities, `resources/list`, `resources/templates/list` and `resources/read`."""

from __future__ import annotations

from typing import Literal

import msgspec

from ._content import Annotations, ResourceContents
from ._jsonrpc import CacheScope, MethodTagged, PaginatedRequestParams, Result
from ._meta import Icon, RequestId, RequestMeta
from ._wire import UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "ListResourceTemplatesRequest",
    "ListResourceTemplatesResult",
    "ListResourcesRequest",
    "ListResourcesResult",
    "ReadResourceRequest",
    "ReadResourceRequestParams",
    "ReadResourceResult",
    "Resource",
    "ResourceTemplate",
]


class Resource(Wire, frozen=True, kw_only=True):
    """A resource the server can read."""

    uri: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    size: int | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ResourceTemplate(Wire, frozen=True, kw_only=True):
    """A parameterised family of resources (RFC 6570 `uri_template`)."""

    uri_template: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ListResourcesRequest(
    MethodTagged, tag_field="method", tag="resources/list", frozen=True, kw_only=True
):
    """`resources/list`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: PaginatedRequestParams


class ListResourcesResult(Result, frozen=True, kw_only=True):
    """One page of resources (cacheable)."""

    resources: list[Resource]
    next_cursor: str | UnsetType = UNSET
    ttl_ms: int = 0
    cache_scope: CacheScope = "private"


class ListResourceTemplatesRequest(
    MethodTagged, tag_field="method", tag="resources/templates/list", frozen=True, kw_only=True
):
    """`resources/templates/list`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: PaginatedRequestParams


class ListResourceTemplatesResult(Result, frozen=True, kw_only=True):
    """One page of resource templates (cacheable)."""

    resource_templates: list[ResourceTemplate]
    next_cursor: str | UnsetType = UNSET
    ttl_ms: int = 0
    cache_scope: CacheScope = "private"


class ReadResourceRequestParams(Wire, frozen=True, kw_only=True):
    """Params of `resources/read`, including the MRTR retry fields."""

    uri: str
    input_responses: dict[str, JSONObject] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET
    meta: RequestMeta = msgspec.field(name="_meta")


class ReadResourceRequest(
    MethodTagged, tag_field="method", tag="resources/read", frozen=True, kw_only=True
):
    """`resources/read`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: ReadResourceRequestParams


class ReadResourceResult(Result, frozen=True, kw_only=True):
    """The contents of a resource (cacheable)."""

    contents: list[ResourceContents]
    ttl_ms: int = 0
    cache_scope: CacheScope = "private"
