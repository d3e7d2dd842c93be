"""Protocol versions, `_meta` keys, capabilities and the per-request `_meta` object."""

# Design: capabilities stay plain JSON objects (`{"elicitation": {}}`): the spec keeps adding
# sub-keys, and the server's capability gate reads them as sets of keys, not as typed fields.
from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from mrtr.errors import UnsupportedProtocolVersion

from ._wire import UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "CLIENT_CAPABILITIES_KEY",
    "CLIENT_INFO_KEY",
    "LOG_LEVEL_KEY",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSION_KEY",
    "RETRY_AFTER_KEY",
    "SERVER_INFO_KEY",
    "SUBSCRIPTION_ID_KEY",
    "SUPPORTED_VERSIONS",
    "TASKS_EXTENSION",
    "ClientCapabilities",
    "Icon",
    "Implementation",
    "LoggingLevel",
    "ProgressToken",
    "RequestId",
    "RequestMeta",
    "Role",
    "ServerCapabilities",
    "check_version",
]

PROTOCOL_VERSION = "2026-07-28"
SUPPORTED_VERSIONS: tuple[str, ...] = (PROTOCOL_VERSION,)

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
# mrtr's own: the milliseconds to wait before retrying a state-only input_required round that
# says "not yet" (a URL elicitation not completed); such a round does not count as one.
RETRY_AFTER_KEY = "io.github.mrtr/retryAfterMs"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

LoggingLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
Role: TypeAlias = Literal["user", "assistant"]
RequestId: TypeAlias = str | int
ProgressToken: TypeAlias = str | int


class Icon(Wire, frozen=True, kw_only=True):
    """An icon a client may display (`src` is a URI, often a data: URI)."""

    src: str
    mime_type: str | UnsetType = UNSET
    sizes: list[str] | UnsetType = UNSET
    theme: Literal["light", "dark"] | UnsetType = UNSET


class Implementation(Wire, frozen=True, kw_only=True):
    """Name and version of an MCP client or server (self-reported, never trusted)."""

    name: str
    version: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    website_url: str | UnsetType = UNSET


class ClientCapabilities(Wire, frozen=True, kw_only=True):
    """What the client declared on this request; `{}` means no optional capability."""

    experimental: dict[str, JSONObject] | UnsetType = UNSET
    roots: JSONObject | UnsetType = UNSET
    sampling: JSONObject | UnsetType = UNSET
    elicitation: JSONObject | UnsetType = UNSET
    extensions: dict[str, JSONObject] | UnsetType = UNSET


class ServerCapabilities(Wire, frozen=True, kw_only=True):
    """What the server offers, as advertised by `server/discover`."""

    experimental: dict[str, JSONObject] | UnsetType = UNSET
    logging: JSONObject | UnsetType = UNSET
    completions: JSONObject | UnsetType = UNSET
    prompts: JSONObject | UnsetType = UNSET
    resources: JSONObject | UnsetType = UNSET
    tools: JSONObject | UnsetType = UNSET
    extensions: dict[str, JSONObject] | UnsetType = UNSET


class RequestMeta(Wire, frozen=True, kw_only=True):
    """`params._meta` of every request: version and capabilities are required.

    Unknown keys are tolerated on decode (and dropped).
    """

    protocol_version: str = msgspec.field(name=PROTOCOL_VERSION_KEY)
    client_capabilities: ClientCapabilities = msgspec.field(name=CLIENT_CAPABILITIES_KEY)
    client_info: Implementation | UnsetType = msgspec.field(default=UNSET, name=CLIENT_INFO_KEY)
    log_level: LoggingLevel | UnsetType = msgspec.field(default=UNSET, name=LOG_LEVEL_KEY)
    progress_token: ProgressToken | UnsetType = msgspec.field(default=UNSET, name="progressToken")
    traceparent: str | UnsetType = msgspec.field(default=UNSET, name="traceparent")
    tracestate: str | UnsetType = msgspec.field(default=UNSET, name="tracestate")
    baggage: str | UnsetType = msgspec.field(default=UNSET, name="baggage")


def check_version(meta: RequestMeta) -> None:
    """Raise UnsupportedProtocolVersion unless `meta.protocol_version` is one we serve."""
    if meta.protocol_version not in SUPPORTED_VERSIONS:
        raise UnsupportedProtocolVersion(list(SUPPORTED_VERSIONS), meta.protocol_version)
