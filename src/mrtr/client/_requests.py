"""One request's wire details: the `Mcp-*` headers, reply decoding, notification routing."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib import metadata
from typing import Protocol, TypeAlias

from mrtr.errors import ProtocolError
from mrtr.protocol import (
    UNSET,
    CallToolRequest,
    CancelTaskRequest,
    CompleteRequest,
    DiscoverRequest,
    GetPromptRequest,
    GetTaskRequest,
    Implementation,
    ListPromptsRequest,
    ListResourcesRequest,
    ListResourceTemplatesRequest,
    ListToolsRequest,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    ProgressNotification,
    ReadResourceRequest,
    UpdateTaskRequest,
    decode_server_message,
    derive_headers,
)

from ._errors import UnexpectedResult
from ._steps import FlowRequest, TaskRequest
from .transports._base import MessageSink

__all__ = [
    "default_client_info",
    "ListRequest",
    "LogHandler",
    "LogRoute",
    "ProgressHandler",
    "Request",
    "decode_reply",
    "notification_sink",
    "request_headers",
]

log = logging.getLogger("mrtr.client")

Request: TypeAlias = (
    DiscoverRequest
    | ListToolsRequest
    | ListPromptsRequest
    | ListResourcesRequest
    | ListResourceTemplatesRequest
    | CompleteRequest
    | FlowRequest
    | TaskRequest
)
ListRequest: TypeAlias = (
    ListToolsRequest | ListPromptsRequest | ListResourcesRequest | ListResourceTemplatesRequest
)


class ProgressHandler(Protocol):
    """Receives `notifications/progress` for one call (`progress` increases)."""

    def __call__(self, progress: float, total: float | None, message: str | None, /) -> None: ...


class LogHandler(Protocol):
    """Receives the server's log messages (`notifications/message`): `params.level`,
    `params.data` (any JSON, usually text) and `params.logger` (may be UNSET)."""

    def __call__(self, params: LoggingMessageNotificationParams, /) -> None: ...


class LogRoute:
    """A Client's LogHandler, called once per log message however many sinks see it.

    Over stdio a message without a request id reaches the sink of every request in flight
    (the same bytes object): only the first passes. A failing handler is logged, never raised
    into the transport that delivered the message.
    """

    def __init__(self, handler: LogHandler) -> None:
        self.handler = handler
        self._last: bytes | None = None

    def __call__(self, message: bytes, params: LoggingMessageNotificationParams) -> None:
        if message is self._last:
            return
        self._last = message
        try:
            self.handler(params)
        except Exception:
            log.exception("the log handler failed")


def request_headers(request: Request, header_map: Mapping[str, str]) -> dict[str, str]:
    """The HTTP headers mirroring `request` (`header_map` is the tool's `x-mcp-header` map)."""
    name: str | None = None
    arguments: Mapping[str, object] | None = None
    if isinstance(request, CallToolRequest):
        name = request.params.name
        arguments = request.params.arguments or None
    elif isinstance(request, GetPromptRequest):
        name = request.params.name
    elif isinstance(request, ReadResourceRequest):
        name = request.params.uri
    elif isinstance(request, GetTaskRequest | UpdateTaskRequest | CancelTaskRequest):
        name = request.params.task_id  # ext-tasks: `Mcp-Name: <taskId>` on tasks/*
    return derive_headers(
        protocol_version=request.params.meta.protocol_version, method=request.method,
        name=name, arguments=arguments, header_map=header_map if name is not None else {},
    )


def decode_reply(raw: bytes, method: str) -> object:
    """Decode a reply; a malformed one raises UnexpectedResult (the server's fault)."""
    try:
        return decode_server_message(raw, method)
    except ProtocolError as exc:  # the server's reply is malformed: a local failure
        raise UnexpectedResult(f"invalid reply to {method}: {exc.message}") from None


def notification_sink(request: Request, progress: ProgressHandler | None,
                      logs: LogRoute | None = None) -> MessageSink:
    """A sink passing this request's `notifications/progress` to `progress` and the server's
    `notifications/message` to `logs`."""
    token = request.params.meta.progress_token
    if token is UNSET:
        progress = None

    def sink(message: bytes) -> None:
        if progress is None and logs is None:
            return
        try:
            note = decode_server_message(message, request.method)
        except ProtocolError:
            log.debug("ignoring a malformed notification")
            return
        if isinstance(note, ProgressNotification):
            if progress is not None and note.params.progress_token == token:
                p = note.params
                progress(p.progress, None if p.total is UNSET else p.total,
                         None if p.message is UNSET else p.message)
        elif isinstance(note, LoggingMessageNotification) and logs is not None:
            logs(message, note.params)

    return sink


def default_client_info() -> Implementation:
    """`clientInfo` when the caller gives none: mrtr and its installed version."""
    try:
        version = metadata.version("mrtr")
    except metadata.PackageNotFoundError:
        version = "0"
    return Implementation(name="mrtr", version=version)
