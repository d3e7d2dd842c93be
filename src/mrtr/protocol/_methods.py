"""The method table: every request we serve, its types and rules, and the message unions."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, TypeAlias

import msgspec

from ._completion import CompleteRequest, CompleteRequestParams, CompleteResult
from ._discover import DiscoverRequest, DiscoverResult
from ._input import InputRequiredResult
from ._jsonrpc import EmptyResult, PaginatedRequestParams, RequestParams
from ._meta import TASKS_EXTENSION
from ._notifications import (
    CancelledNotification,
    LoggingMessageNotification,
    ProgressNotification,
    PromptListChangedNotification,
    ResourceListChangedNotification,
    ResourceUpdatedNotification,
    ToolListChangedNotification,
)
from ._prompts import (
    GetPromptRequest,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsRequest,
    ListPromptsResult,
)
from ._resources import (
    ListResourcesRequest,
    ListResourcesResult,
    ListResourceTemplatesRequest,
    ListResourceTemplatesResult,
    ReadResourceRequest,
    ReadResourceRequestParams,
    ReadResourceResult,
)
from ._subscriptions import (
    SubscriptionsAcknowledgedNotification,
    SubscriptionsListenRequest,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)
from ._tasks import (
    CancelTaskRequest,
    CancelTaskRequestParams,
    CancelTaskResult,
    CreateTaskResult,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    TaskStatusNotification,
    UpdateTaskRequest,
    UpdateTaskRequestParams,
    UpdateTaskResult,
)
from ._tools import (
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    ListToolsRequest,
    ListToolsResult,
)
from ._wire import JSONObject

__all__ = [
    "METHODS",
    "REMOVED_METHODS",
    "ClientMessage",
    "ClientNotification",
    "ClientRequest",
    "MethodSpec",
    "ServerNotification",
    "ServerResult",
]

ClientRequest: TypeAlias = (
    DiscoverRequest
    | ListToolsRequest
    | CallToolRequest
    | ListPromptsRequest
    | GetPromptRequest
    | ListResourcesRequest
    | ListResourceTemplatesRequest
    | ReadResourceRequest
    | CompleteRequest
    | SubscriptionsListenRequest
    | GetTaskRequest
    | UpdateTaskRequest
    | CancelTaskRequest
)
ClientNotification: TypeAlias = CancelledNotification
ClientMessage: TypeAlias = ClientRequest | ClientNotification

ServerNotification: TypeAlias = (
    ProgressNotification
    | LoggingMessageNotification
    | CancelledNotification
    | ToolListChangedNotification
    | PromptListChangedNotification
    | ResourceListChangedNotification
    | ResourceUpdatedNotification
    | SubscriptionsAcknowledgedNotification
    | TaskStatusNotification
)

ServerResult: TypeAlias = (
    DiscoverResult
    | ListToolsResult
    | CallToolResult
    | ListPromptsResult
    | GetPromptResult
    | ListResourcesResult
    | ListResourceTemplatesResult
    | ReadResourceResult
    | CompleteResult
    | SubscriptionsListenResult
    | GetTaskResult
    | UpdateTaskResult
    | CancelTaskResult
    | EmptyResult
    | InputRequiredResult
    | CreateTaskResult
)


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """What the protocol layer knows about one request method.

    `name_field` is the params field `Mcp-Name` mirrors; `client_capability` is the path of
    the client capability the request itself needs (e.g. `("extensions", TASKS_EXTENSION)`).
    """

    method: str
    request_type: type[msgspec.Struct]
    params_type: type[msgspec.Struct]
    result_type: type[msgspec.Struct]
    may_input_required: bool = False
    may_create_task: bool = False
    server_capability: Literal["tools", "prompts", "resources", "completions"] | None = None
    name_field: Literal["name", "uri", "taskId"] | None = None
    client_capability: tuple[str, ...] | None = None

    def required_capability(self) -> JSONObject | None:
        """`client_capability` as a ClientCapabilities-shaped object (for error data)."""
        if self.client_capability is None:
            return None
        required: JSONObject = {}
        for key in reversed(self.client_capability):
            required = {key: required}
        return required


_TASKS_CAPABILITY = ("extensions", TASKS_EXTENSION)

_SPECS = (
    MethodSpec("server/discover", DiscoverRequest, RequestParams, DiscoverResult),
    MethodSpec(
        "tools/list",
        ListToolsRequest,
        PaginatedRequestParams,
        ListToolsResult,
        server_capability="tools",
    ),
    MethodSpec(
        "tools/call",
        CallToolRequest,
        CallToolRequestParams,
        CallToolResult,
        may_input_required=True,
        may_create_task=True,
        server_capability="tools",
        name_field="name",
    ),
    MethodSpec(
        "prompts/list",
        ListPromptsRequest,
        PaginatedRequestParams,
        ListPromptsResult,
        server_capability="prompts",
    ),
    MethodSpec(
        "prompts/get",
        GetPromptRequest,
        GetPromptRequestParams,
        GetPromptResult,
        may_input_required=True,
        server_capability="prompts",
        name_field="name",
    ),
    MethodSpec(
        "resources/list",
        ListResourcesRequest,
        PaginatedRequestParams,
        ListResourcesResult,
        server_capability="resources",
    ),
    MethodSpec(
        "resources/templates/list",
        ListResourceTemplatesRequest,
        PaginatedRequestParams,
        ListResourceTemplatesResult,
        server_capability="resources",
    ),
    MethodSpec(
        "resources/read",
        ReadResourceRequest,
        ReadResourceRequestParams,
        ReadResourceResult,
        may_input_required=True,
        server_capability="resources",
        name_field="uri",
    ),
    MethodSpec(
        "completion/complete",
        CompleteRequest,
        CompleteRequestParams,
        CompleteResult,
        server_capability="completions",
    ),
    MethodSpec(
        "subscriptions/listen",
        SubscriptionsListenRequest,
        SubscriptionsListenRequestParams,
        SubscriptionsListenResult,
    ),
    MethodSpec(
        "tasks/get",
        GetTaskRequest,
        GetTaskRequestParams,
        GetTaskResult,
        name_field="taskId",
        client_capability=_TASKS_CAPABILITY,
    ),
    MethodSpec(
        "tasks/update",
        UpdateTaskRequest,
        UpdateTaskRequestParams,
        UpdateTaskResult,
        name_field="taskId",
        client_capability=_TASKS_CAPABILITY,
    ),
    MethodSpec(
        "tasks/cancel",
        CancelTaskRequest,
        CancelTaskRequestParams,
        CancelTaskResult,
        name_field="taskId",
        client_capability=_TASKS_CAPABILITY,
    ),
)

METHODS: MappingProxyType[str, MethodSpec] = MappingProxyType({s.method: s for s in _SPECS})

REMOVED_METHODS: frozenset[str] = frozenset(
    {
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "notifications/initialized",
        "notifications/roots/list_changed",
        "tasks/result",
        "tasks/list",
    }
)
