"""`server/discover`: versions, capabilities and instructions (replaces `initialize`)."""

from __future__ import annotations

from typing import Literal

from ._jsonrpc import CacheScope, MethodTagged, RequestParams, Result
from ._meta import RequestId, ServerCapabilities
from ._wire import UNSET, UnsetType

__all__ = ["DiscoverRequest", "DiscoverResult"]


class DiscoverRequest(
    MethodTagged, tag_field="method", tag="server/discover", frozen=True, kw_only=True
):
    """`server/discover`; its params are only the standard `_meta`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: RequestParams


class DiscoverResult(Result, frozen=True, kw_only=True):
    """What the server supports (cacheable; server info goes in `_meta`)."""

    supported_versions: list[str]
    capabilities: ServerCapabilities
    instructions: str | UnsetType = UNSET
    ttl_ms: int = 0
    cache_scope: CacheScope = "private"
