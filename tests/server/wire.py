"""Schema checks for server tests: every reply a test sees is validated against schema.json.

`WireClient` is a TestClient whose every reply is checked against the 2026-07-28 schema
(`<Method>ResultResponse` for results, `JSONRPCErrorResponse` for errors). Without ../shared the
check is a no-op; `require_schema()` lets a test skip with the reason instead.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import msgspec
import pytest

from mrtr.testing import TestClient
from tests.conftest import SHARED

SCHEMA_PATH = SHARED / "spec" / "schema-2026-07-28" / "schema.json"
FROZEN_STATE_ERROR = {"code": -32602, "message": "Invalid or expired requestState"}

RESPONSE_DEFS = {
    "server/discover": "DiscoverResultResponse",
    "tools/list": "ListToolsResultResponse",
    "tools/call": "CallToolResultResponse",
    "prompts/list": "ListPromptsResultResponse",
    "prompts/get": "GetPromptResultResponse",
    "resources/list": "ListResourcesResultResponse",
    "resources/templates/list": "ListResourceTemplatesResultResponse",
    "resources/read": "ReadResourceResultResponse",
    "completion/complete": "CompleteResultResponse",
}


@functools.cache
def _schema() -> dict[str, Any] | None:
    if not SCHEMA_PATH.is_file():
        return None
    return json.loads(SCHEMA_PATH.read_text())  # type: ignore[no-any-return]


@functools.cache
def _validator(definition: str) -> Any:
    schema = _schema()
    assert schema is not None
    return jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{definition}"})


def require_schema() -> None:
    """Skip the calling test when the shared schema is not beside the checkout."""
    if _schema() is None:
        pytest.skip(f"../shared is absent ({SCHEMA_PATH}); schema checks run in CI")


def check_reply(method: str | None, reply: Mapping[str, Any]) -> None:
    """Assert that `reply` validates as a response to `method` (no-op without the schema)."""
    if _schema() is None or not reply:
        return
    if "error" in reply:
        definition = "JSONRPCErrorResponse"
    else:
        definition = RESPONSE_DEFS.get(method or "", "JSONRPCResultResponse")
        _validator("JSONRPCResultResponse").validate(reply)
    errors = sorted(_validator(definition).iter_errors(reply), key=str)
    assert not errors, f"{method} reply does not validate as {definition}: {errors[0]}\n{reply}"


class WireClient(TestClient):
    """A TestClient that validates every reply against the schema and counts them."""

    __test__ = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checked = 0

    def send_raw(self, data: bytes) -> dict[str, Any]:
        reply = super().send_raw(data)
        try:
            message = msgspec.json.decode(data)
        except msgspec.DecodeError:
            message = None
        method = message.get("method") if isinstance(message, dict) else None
        check_reply(method if isinstance(method, str) else None, reply)
        if reply and "error" in reply and isinstance(message, dict) and "id" in message:
            assert reply.get("id") == message["id"], "error replies echo the request id"
        self.checked += 1
        return reply
