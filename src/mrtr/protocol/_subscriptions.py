"""`subscriptions/listen`: the filter, the request, its acknowledgement and its closing result."""

from __future__ import annotations

from typing import Literal

import msgspec

from ._jsonrpc import MethodTagged, Result
from ._meta import RequestId, RequestMeta
from ._wire import UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "SubscriptionFilter",
    "SubscriptionsAcknowledgedNotification",
    "SubscriptionsAcknowledgedNotificationParams",
    "SubscriptionsListenRequest",
    "SubscriptionsListenRequestParams",
    "SubscriptionsListenResult",
]


class SubscriptionFilter(Wire, frozen=True, kw_only=True):
    """Which notifications a listen stream carries (`task_ids` is from the tasks extension)."""

    tools_list_changed: bool | UnsetType = UNSET
    prompts_list_changed: bool | UnsetType = UNSET
    resources_list_changed: bool | UnsetType = UNSET
    resource_subscriptions: list[str] | UnsetType = UNSET
    task_ids: list[str] | UnsetType = UNSET


class SubscriptionsListenRequestParams(Wire, frozen=True, kw_only=True):
    """Params of `subscriptions/listen`."""

    notifications: SubscriptionFilter
    meta: RequestMeta = msgspec.field(name="_meta")


class SubscriptionsListenRequest(
    MethodTagged, tag_field="method", tag="subscriptions/listen", frozen=True, kw_only=True
):
    """`subscriptions/listen`: opens a long-lived notification stream."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: SubscriptionsListenRequestParams


class SubscriptionsListenResult(Result, frozen=True, kw_only=True):
    """Sent when the server closes a listen stream; `_meta` carries the subscription id."""

    meta: JSONObject = msgspec.field(name="_meta")


class SubscriptionsAcknowledgedNotificationParams(Wire, frozen=True, kw_only=True):
    """The subset of the filter the server will honour."""

    notifications: SubscriptionFilter
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class SubscriptionsAcknowledgedNotification(
    MethodTagged,
    tag_field="method",
    tag="notifications/subscriptions/acknowledged",
    frozen=True,
    kw_only=True,
):
    """The first message of a listen stream."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: SubscriptionsAcknowledgedNotificationParams
