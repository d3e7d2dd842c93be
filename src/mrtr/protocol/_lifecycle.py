"""The 2025 session wire: `initialize`, `ping`, logging level, subscriptions, server requests.

Types only (spec 2025-11-25): what a dual-era server answers to an `initialize` client and what
a dual-era client sends to an `initialize` server. Results here carry no `resultType`.
"""

# Design: a 2025 result has no `resultType`, `ttlMs` or `cacheScope`, so these results derive
# from Wire rather than from the 2026-07-28 `Result`. A server→client request is one generic
# envelope (`JSONRPCRequest`): its params are the 2026-07-28 input-request params, plus
# `elicitationId` for URL elicitation (`ElicitationCreateParams`).
from __future__ import annotations

from typing import Literal

import msgspec

from ._jsonrpc import MethodTagged
from ._meta import ClientCapabilities, Implementation, LoggingLevel, RequestId, ServerCapabilities
from ._wire import UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "LEGACY_VERSIONS",
    "ElicitationCompleteNotification",
    "ElicitationCompleteNotificationParams",
    "ElicitationCreateParams",
    "InitializedNotification",
    "InitializeRequest",
    "InitializeRequestParams",
    "InitializeResult",
    "JSONRPCRequest",
    "PingRequest",
    "RootsListChangedNotification",
    "SetLevelRequest",
    "SetLevelRequestParams",
    "SubscribeRequest",
    "SubscribeRequestParams",
    "UnsubscribeRequest",
    "negotiate_version",
]

# Newest first: `initialize` answers the client's version when listed, else the first one.
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")


def negotiate_version(requested: object) -> str:
    """The version to answer an `initialize` with: `requested` if we speak it, else our newest."""
    return requested if isinstance(requested, str) and requested in LEGACY_VERSIONS else (
        LEGACY_VERSIONS[0])


class InitializeRequestParams(Wire, frozen=True, kw_only=True):
    """What the client speaks and offers; `capabilities` is fixed for the session."""

    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class InitializeRequest(
    MethodTagged, tag_field="method", tag="initialize", frozen=True, kw_only=True
):
    """`initialize`: the first request of a 2025 session."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: InitializeRequestParams


class InitializeResult(Wire, frozen=True, kw_only=True):
    """The negotiated version, the server's capabilities and identity."""

    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class InitializedNotification(
    MethodTagged, tag_field="method", tag="notifications/initialized", frozen=True, kw_only=True
):
    """`notifications/initialized`: the client is ready."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: JSONObject | UnsetType = UNSET


class PingRequest(MethodTagged, tag_field="method", tag="ping", frozen=True, kw_only=True):
    """`ping` (either direction); the answer is exactly `{}`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: JSONObject | UnsetType = UNSET


class SetLevelRequestParams(Wire, frozen=True, kw_only=True):
    """The lowest level the client wants in `notifications/message`."""

    level: LoggingLevel
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class SetLevelRequest(
    MethodTagged, tag_field="method", tag="logging/setLevel", frozen=True, kw_only=True
):
    """`logging/setLevel`; the answer is exactly `{}`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: SetLevelRequestParams


class SubscribeRequestParams(Wire, frozen=True, kw_only=True):
    """The resource to (un)subscribe to."""

    uri: str
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class SubscribeRequest(
    MethodTagged, tag_field="method", tag="resources/subscribe", frozen=True, kw_only=True
):
    """`resources/subscribe`: send `notifications/resources/updated` for `uri`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: SubscribeRequestParams


class UnsubscribeRequest(
    MethodTagged, tag_field="method", tag="resources/unsubscribe", frozen=True, kw_only=True
):
    """`resources/unsubscribe`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: SubscribeRequestParams


class RootsListChangedNotification(
    MethodTagged,
    tag_field="method",
    tag="notifications/roots/list_changed",
    frozen=True,
    kw_only=True,
):
    """`notifications/roots/list_changed` (client to server)."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: JSONObject | UnsetType = UNSET


class ElicitationCreateParams(Wire, frozen=True, kw_only=True):
    """`elicitation/create` params as sent in a session: form, or URL with `elicitation_id`."""

    mode: Literal["form", "url"] | UnsetType = UNSET
    message: str
    requested_schema: JSONObject | UnsetType = UNSET
    url: str | UnsetType = UNSET
    elicitation_id: str | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ElicitationCompleteNotificationParams(Wire, frozen=True, kw_only=True):
    """Which URL elicitation finished."""

    elicitation_id: str


class ElicitationCompleteNotification(
    Wire,
    tag_field="method",
    tag="notifications/elicitation/complete",
    frozen=True,
    kw_only=True,
):
    """`notifications/elicitation/complete` (server to client, 2025-11-25)."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: ElicitationCompleteNotificationParams


class JSONRPCRequest(Wire, frozen=True, kw_only=True):
    """A request with any method: what a server sends its client in a session
    (`elicitation/create`, `sampling/createMessage`, `roots/list`, `ping`)."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    method: str
    params: JSONObject | UnsetType = UNSET
