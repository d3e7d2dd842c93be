"""Every schema example decodes into its Struct and re-encodes to an equal JSON value."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import mrtr.protocol as p
from mrtr import errors
from tests.conftest import SHARED

EXAMPLES = Path("spec") / "schema-2026-07-28" / "examples"

# Full result responses go through the client decoder, keyed by the method that produced them.
RESPONSE_METHODS = {
    "CallToolResultResponse": "tools/call",
    "CompleteResultResponse": "completion/complete",
    "DiscoverResultResponse": "server/discover",
    "GetPromptResultResponse": "prompts/get",
    "ListPromptsResultResponse": "prompts/list",
    "ListResourceTemplatesResultResponse": "resources/templates/list",
    "ListResourcesResultResponse": "resources/list",
    "ListToolsResultResponse": "tools/list",
    "ReadResourceResultResponse": "resources/read",
    "SubscriptionsListenResultResponse": "subscriptions/listen",
}
ERROR_RESPONSES = {
    "HeaderMismatchError": errors.HeaderMismatch,
    "MissingRequiredClientCapabilityError": errors.MissingRequiredClientCapability,
    "UnsupportedProtocolVersionError": errors.UnsupportedProtocolVersion,
}
ERROR_OBJECTS = {
    "InternalError": errors.InternalError,
    "InvalidParamsError": errors.InvalidParams,
    "MethodNotFoundError": errors.MethodNotFound,
    "ParseError": errors.ParseError,
}
# Directory names that are not our Struct names.
RENAMED: dict[str, object] = {
    "ElicitRequestFormParams": p.ElicitRequestParams,
    "ElicitRequestURLParams": p.ElicitRequestParams,
    "InputRequests": dict[str, p.InputRequest],
}
CLIENT_MESSAGES = {s.request_type.__name__ for s in p.METHODS.values()} | {"CancelledNotification"}
SERVER_NOTIFICATIONS = {
    "LoggingMessageNotification",
    "ProgressNotification",
    "PromptListChangedNotification",
    "ResourceListChangedNotification",
    "ResourceUpdatedNotification",
    "SubscriptionsAcknowledgedNotification",
    "ToolListChangedNotification",
}
# Known, documented differences between an example and our re-encoding.
KNOWN_DELTAS: dict[str, Callable[[Any], Any]] = {
    # InputRequests values carry no JSON-RPC id (schema: method and params only); the example's
    # stray id is dropped.
    "ListRootsRequest/list-roots-request.json": lambda v: {k: x for k, x in v.items() if k != "id"},
    # The example omits ttlMs/cacheScope, which the schema requires; clients read a missing TTL
    # as 0, so we decode it as 0/private and always write both (spec: server/utilities/caching).
    "ReadResourceResultResponse/read-resource-result-response.json": lambda v: {
        **v,
        "result": {**v["result"], "ttlMs": 0, "cacheScope": "private"},
    },
}


def example_files() -> list[str]:
    root = SHARED / EXAMPLES
    if not root.is_dir():
        return []
    return sorted(str(f.relative_to(root)) for f in root.glob("*/*.json"))


def decode_example(kind: str, data: bytes, shared: Path) -> object:
    if kind in RESPONSE_METHODS:
        reply = p.decode_server_message(data, RESPONSE_METHODS[kind])
        assert isinstance(reply, p.JSONRPCResultResponse)
        return reply
    if kind in ERROR_RESPONSES:
        reply = p.decode_server_message(data, "tools/call")
        assert isinstance(reply, p.JSONRPCErrorResponse)
        assert isinstance(errors.from_wire(reply.error), ERROR_RESPONSES[kind])
        return reply
    if kind in ERROR_OBJECTS:
        obj = p.decode(data, p.ErrorObject)
        assert isinstance(errors.from_wire(obj), ERROR_OBJECTS[kind])
        return obj
    if kind == "InputResponses":
        return decode_input_responses(data, shared)
    if kind in SERVER_NOTIFICATIONS:
        note = p.decode_server_message(data, "tools/call")
        assert type(note).__name__ == kind
        return note
    if kind in CLIENT_MESSAGES:
        message = p.decode_client_message(data)
        assert type(message).__name__ == kind
        return message
    target: Any = RENAMED.get(kind) or getattr(p, kind)
    return p.decode(data, target)


def decode_input_responses(data: bytes, shared: Path) -> dict[str, p.InputResponse]:
    """Type each response by the method asked under the same key in the InputRequests example."""
    asks_file = shared / EXAMPLES / "InputRequests"
    asks = p.decode(next(asks_file.glob("*.json")).read_bytes(), dict[str, p.InputRequest])
    raw = p.decode(data, dict[str, p.JSONObject])
    return {key: p.decode_input_response(asks[key].method, value) for key, value in raw.items()}


@pytest.mark.parametrize("name", example_files() or ["<absent>"])
def test_example_round_trips(name: str, shared_dir: Path) -> None:
    path = shared_dir / EXAMPLES / name
    data = path.read_bytes()
    kind = name.split("/")[0]
    decoded = decode_example(kind, data, shared_dir)
    expected = json.loads(data)
    if name in KNOWN_DELTAS:
        expected = KNOWN_DELTAS[name](expected)
    assert json.loads(p.encode(decoded)) == expected


def test_corpus_is_not_empty(shared_dir: Path) -> None:
    assert len(example_files()) > 100


def test_every_example_kind_is_a_public_name_or_mapped(shared_dir: Path) -> None:
    kinds = {name.split("/")[0] for name in example_files()}
    mapped = set(RESPONSE_METHODS) | set(ERROR_RESPONSES) | set(ERROR_OBJECTS) | set(RENAMED)
    unknown = {k for k in kinds - mapped - {"InputResponses"} if not hasattr(p, k)}
    assert not unknown


def test_decoded_struct_is_frozen(shared_dir: Path) -> None:
    data = (shared_dir / EXAMPLES / "Tool" / "with-no-parameters.json").read_bytes()
    tool = p.decode(data, p.Tool)
    with pytest.raises(AttributeError):
        tool.name = "x"  # type: ignore[misc]
    assert isinstance(tool, msgspec.Struct)
