"""Notifications: progress, logging, cancellation and list/resource changes."""

from __future__ import annotations

from typing import Literal

import msgspec

from ._jsonrpc import MethodTagged, NotificationParams
from ._meta import LoggingLevel, ProgressToken, RequestId
from ._wire import JSON, UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "CancelledNotification",
    "CancelledNotificationParams",
    "LoggingMessageNotification",
    "LoggingMessageNotificationParams",
    "ProgressNotification",
    "ProgressNotificationParams",
    "PromptListChangedNotification",
    "ResourceListChangedNotification",
    "ResourceUpdatedNotification",
    "ResourceUpdatedNotificationParams",
    "ToolListChangedNotification",
]


class ProgressNotificationParams(Wire, frozen=True, kw_only=True):
    """Progress of the request that sent `progress_token`; `progress` increases."""

    progress_token: ProgressToken
    progress: float
    total: float | UnsetType = UNSET
    message: str | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ProgressNotification(
    MethodTagged, tag_field="method", tag="notifications/progress", frozen=True, kw_only=True
):
    """`notifications/progress`."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: ProgressNotificationParams


class LoggingMessageNotificationParams(Wire, frozen=True, kw_only=True):
    """A log entry; only sent when the request set `_meta` logLevel."""

    level: LoggingLevel
    data: JSON
    logger: str | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class LoggingMessageNotification(
    MethodTagged, tag_field="method", tag="notifications/message", frozen=True, kw_only=True
):
    """`notifications/message`."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: LoggingMessageNotificationParams


class CancelledNotificationParams(Wire, frozen=True, kw_only=True):
    """Which request is cancelled, and why."""

    request_id: RequestId
    reason: str | UnsetType = UNSET
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class CancelledNotification(
    MethodTagged, tag_field="method", tag="notifications/cancelled", frozen=True, kw_only=True
):
    """`notifications/cancelled` (stdio only; never used for tasks)."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: CancelledNotificationParams


class ToolListChangedNotification(
    MethodTagged,
    tag_field="method",
    tag="notifications/tools/list_changed",
    frozen=True,
    kw_only=True,
):
    """`notifications/tools/list_changed`."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: NotificationParams | UnsetType = UNSET


class PromptListChangedNotification(
    MethodTagged,
    tag_field="method",
    tag="notifications/prompts/list_changed",
    frozen=True,
    kw_only=True,
):
    """`notifications/prompts/list_changed`."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: NotificationParams | UnsetType = UNSET


class ResourceListChangedNotification(
    MethodTagged,
    tag_field="method",
    tag="notifications/resources/list_changed",
    frozen=True,
    kw_only=True,
):
    """`notifications/resources/list_changed`."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: NotificationParams | UnsetType = UNSET


class ResourceUpdatedNotificationParams(Wire, frozen=True, kw_only=True):
    """The subscribed resource that changed."""

    uri: str
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ResourceUpdatedNotification(
    MethodTagged,
    tag_field="method",
    tag="notifications/resources/updated",
    frozen=True,
    kw_only=True,
):
    """`notifications/resources/updated`."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: ResourceUpdatedNotificationParams
