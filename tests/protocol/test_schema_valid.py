"""Everything we encode validates against the official JSON schemas (core and tasks extension)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

import mrtr.protocol as p
from tests.conftest import SHARED

from .strategies import from_type, struct_classes

CORE = Path("spec") / "schema-2026-07-28" / "schema.json"
TASKS = Path("spec") / "tasks-extension" / "schema.json"
SESSION = Path("spec") / "schema-2025-11-25" / "schema.json"  # the types of _lifecycle.py

# Our name -> schema definition name, where they differ.
DEF_NAMES = {"ErrorObject": "Error", "RequestMeta": "RequestMetaObject"}
# Structs with no definition of their own (they are validated inside their parents).
NO_DEFINITION = {
    "CancelTaskRequestParams",
    "Completion",
    "CompletionArgument",
    "CompletionContext",
    "ElicitationCompleteNotificationParams",
    "ElicitationCreateParams",  # form or URL by its fields: checked by the session tests
    "EnumOption",
    "GetTaskRequestParams",
    "JSONRPCResultResponse",  # generic: validated per result below
    "TitledEnumItems",
    "UnknownNotification",
    "UntitledEnumItems",
    "UpdateTaskRequestParams",
}
EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@cache
def validator(def_name: str, session: bool = False) -> Draft202012Validator:
    for rel in (SESSION,) if session else (CORE, TASKS):
        schema = json.loads((SHARED / rel).read_text())
        if def_name in schema["$defs"]:
            return Draft202012Validator({"$ref": f"#/$defs/{def_name}", "$defs": schema["$defs"]})
    raise KeyError(def_name)


def checked_classes() -> list[type[msgspec.Struct]]:
    return [c for c in struct_classes() if c.__name__ not in NO_DEFINITION]


def assert_valid(def_name: str, value: object) -> None:
    wire = json.loads(p.encode(value))
    session = type(value).__module__.endswith("._lifecycle")
    errors = sorted(validator(def_name, session).iter_errors(wire), key=str)
    assert not errors, f"{def_name}: {errors[0].message} in {wire}"


@pytest.mark.parametrize("cls", checked_classes(), ids=lambda c: c.__name__)
@EXAMPLES
@given(data=st.data())
def test_struct_encodes_to_its_schema(cls: type[msgspec.Struct], data: Any) -> None:
    if not (SHARED / CORE).is_file():
        pytest.skip("../shared is absent")
    value = data.draw(from_type(cls))
    assert_valid(DEF_NAMES.get(cls.__name__, cls.__name__), value)


RESULTS = sorted(
    {s.result_type for s in p.METHODS.values()} | {p.InputRequiredResult, p.CreateTaskResult},
    key=lambda c: c.__name__,
)


@pytest.mark.parametrize("cls", RESULTS, ids=lambda c: c.__name__)
@EXAMPLES
@given(data=st.data(), rid=st.integers(0, 2**53 - 1) | st.text(max_size=4))
def test_result_response_validates(cls: type[msgspec.Struct], data: Any, rid: str | int) -> None:
    if not (SHARED / CORE).is_file():
        pytest.skip("../shared is absent")
    result = data.draw(from_type(cls))
    response = msgspec.json.decode(p.encode_result(rid, result))
    errors = list(validator("JSONRPCResultResponse").iter_errors(response))
    assert not errors
    assert_valid(cls.__name__, result)


@EXAMPLES
@given(rid=st.none() | st.integers(0, 9) | st.text(max_size=4), code=st.integers(-32768, 0))
def test_error_response_validates(rid: str | int | None, code: int) -> None:
    if not (SHARED / CORE).is_file():
        pytest.skip("../shared is absent")
    from mrtr import errors

    err = errors.ProtocolError("boom", data={"x": [1]})
    err.code = code  # type: ignore[misc]
    body = msgspec.json.decode(p.encode_error(rid, err))
    assert not list(validator("JSONRPCErrorResponse").iter_errors(body))


def test_every_struct_is_checked_or_listed(shared_dir: Path) -> None:
    names = {c.__name__ for c in struct_classes()}
    assert NO_DEFINITION <= names
    for cls in checked_classes():
        session = cls.__module__.endswith("._lifecycle")
        validator(DEF_NAMES.get(cls.__name__, cls.__name__), session)  # KeyError if absent
