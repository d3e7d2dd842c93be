"""Schema checks for server tests: every reply a test sees is validated against schema.json.

`WireClient` is a TestClient whose every reply is checked against the 2026-07-28 schema
(`<Method>ResultResponse` for results, `JSONRPCErrorResponse` for errors). Without ../shared the
tests still run their behavioural assertions; the replies left unvalidated are counted in
`UNCHECKED` and reported at the end of the run (tests/server/conftest.py).
"""

# Design: skipping a test whose schema check cannot run would also drop its behavioural
# assertions, so a fresh clone would test less than it shows. Instead the schema part is
# reported: a summary line names the missing file and the number of unvalidated replies, and
# the dedicated schema tests (`require_schema()`) skip with the reason, so `-ra` lists them.
from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import msgspec
import pytest

from mrtr.testing import TestClient
from tests.conftest import SHARED

SCHEMA_PATH = SHARED / "spec" / "schema-2026-07-28" / "schema.json"
FROZEN_STATE_ERROR = {"code": -32602, "message": "Invalid or expired requestState"}
UNCHECKED: Counter[str] = Counter()  # replies not schema-validated, by method (test-run tally)

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


def schema_missing_reason() -> str | None:
    """Why replies are not schema-validated in this run, or None when they are."""
    if _schema() is None:
        return (f"../shared is absent ({SCHEMA_PATH}): server replies are not validated against "
                "the 2026-07-28 schema (behavioural assertions still run; CI has ../shared)")
    return None


def require_schema() -> None:
    """Skip the calling test, saying why, when the shared schema is not beside the checkout."""
    reason = schema_missing_reason()
    if reason is not None:
        pytest.skip(reason)


def check_reply(method: str | None, reply: Mapping[str, Any]) -> None:
    """Assert that `reply` validates as a response to `method`.

    Without the schema the reply is only counted in UNCHECKED (reported at the end of the run).
    """
    if not reply:
        return
    if _schema() is None:
        UNCHECKED[method or "(no method)"] += 1
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
