"""Tool input/output schemas from type hints, and argument conversion."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Annotated, Literal, TypedDict

import jsonschema  # type: ignore[import-untyped]
import msgspec
import pytest
from msgspec import Meta

from mrtr.protocol import tool_header_map
from mrtr.server._outputs import output_checker, return_schema
from mrtr.server._schema import (
    ArgumentsInvalid,
    AskIfMissing,
    Header,
    ToolSignature,
    convert_arguments,
    docstring_summary,
    signature_schema,
)


class Context:
    """Stands in for the framework's injected context."""


class Address(msgspec.Struct):
    street: str
    city: str = "Oslo"


class Quote(msgspec.Struct):
    price: float
    address: Address


class Point(msgspec.Struct, array_like=True):
    x: int
    y: int


class Totals(TypedDict):
    total: float


@dataclasses.dataclass
class Receipt:
    rma: str


async def book(
    ctx: Context,
    order_id: Annotated[str, Meta(description="The order to return")],
    region: Annotated[str, Header("Region")],
    count: int = 2,
    note: str | None = None,
    mode: Literal["fast", "slow"] = "fast",
    address: Address | None = None,
    tags: list[str] = ["a"],  # noqa: B006 - a mutable default must not be shared
    *,
    boxes: Annotated[int, Meta(ge=1, le=5), AskIfMissing("How many boxes?")],
    day: Annotated[dt.date, AskIfMissing()] = dt.date(2026, 7, 28),
) -> Quote:
    """Book a return pickup.

    The rest is detail.
    """
    raise NotImplementedError


SIG = signature_schema(book, skip={"ctx"})


def test_input_schema() -> None:
    assert SIG.input_schema == {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "description": "The order to return"},
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "default": 2},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "mode": {"enum": ["fast", "slow"], "default": "fast"},
            "address": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}],
                        "default": None},
            "tags": {"type": "array", "items": {"type": "string"}, "default": ["a"]},
            "boxes": {"type": "integer", "minimum": 1, "maximum": 5},
            "day": {"type": "string", "format": "date", "default": "2026-07-28"},
        },
        "required": ["order_id", "region"],
        "$defs": {
            "Address": {
                "title": "Address",
                "type": "object",
                "properties": {"street": {"type": "string"},
                               "city": {"type": "string", "default": "Oslo"}},
                "required": ["street"],
            }
        },
    }
    jsonschema.Draft202012Validator.check_schema(SIG.input_schema)


def test_signature_metadata() -> None:
    assert isinstance(SIG, ToolSignature)
    assert SIG.param_names == ("order_id", "region", "count", "note", "mode", "address", "tags",
                               "boxes", "day")
    assert tool_header_map(SIG.input_schema) == {"region": "Region"}  # the registry reads this
    assert SIG.ask_if_missing == {
        "boxes": ("How many boxes?",
                  {"type": "integer", "title": "Boxes", "minimum": 1, "maximum": 5}),
        "day": ("Please provide day.",
                {"type": "string", "title": "Day", "format": "date", "default": "2026-07-28"}),
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        SIG.param_names = ()  # type: ignore[misc]


def test_convert_arguments_good() -> None:
    args = convert_arguments(SIG, {"order_id": "o1", "region": "eu", "count": 3, "boxes": 2,
                                   "address": {"street": "Main"}, "day": "2026-08-01",
                                   "unknown": True})
    assert args == {"order_id": "o1", "region": "eu", "count": 3, "note": None, "mode": "fast",
                    "address": Address(street="Main"), "tags": ["a"], "boxes": 2,
                    "day": dt.date(2026, 8, 1)}


def test_omitted_ask_if_missing_parameters_are_absent() -> None:
    args = convert_arguments(SIG, {"order_id": "o1", "region": "eu"})
    assert "boxes" not in args and "day" not in args
    assert args["count"] == 2


def test_mutable_defaults_are_not_shared() -> None:
    first = convert_arguments(SIG, {"order_id": "o1", "region": "eu"})
    first["tags"].append("mutated")  # type: ignore[attr-defined]
    assert convert_arguments(SIG, {"order_id": "o1", "region": "eu"})["tags"] == ["a"]


@pytest.mark.parametrize(("arguments", "message"), [
    ({"region": "eu"}, "Invalid arguments: Object missing required field `order_id`"),
    ({"order_id": "o", "region": "eu", "count": "3"},
     "Invalid arguments: Expected `int`, got `str` - at `$.count`"),
    ({"order_id": "o", "region": "eu", "mode": "warp"},
     "Invalid arguments: Invalid enum value 'warp' - at `$.mode`"),
    ({"order_id": "o", "region": "eu", "boxes": 9},
     "Invalid arguments: Expected `int` <= 5 - at `$.boxes`"),
    ({"order_id": "o", "region": "eu", "address": {}},
     "Invalid arguments: Object missing required field `street` - at `$.address`"),
])
def test_convert_arguments_bad(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ArgumentsInvalid) as info:
        convert_arguments(SIG, arguments)
    assert str(info.value) == message


def test_arguments_must_be_an_object() -> None:
    with pytest.raises(ArgumentsInvalid, match="expected an object"):
        convert_arguments(SIG, ["o1"])  # type: ignore[arg-type]


def test_schema_and_converter_agree() -> None:
    validator = jsonschema.Draft202012Validator(SIG.input_schema)
    for args in ({"order_id": "o", "region": "r"}, {"order_id": "o"}, {"order_id": 1, "region": 2},
                 {"order_id": "o", "region": "r", "boxes": 0}):
        try:
            convert_arguments(SIG, args)
            converted = True
        except ArgumentsInvalid:
            converted = False
        assert validator.is_valid(args) == converted, args


def test_ctx_is_skipped_and_unannotated_parameters_accept_anything() -> None:
    def tool(ctx, value, flag: bool = False):  # type: ignore[no-untyped-def]
        return value

    sig = signature_schema(tool, skip={"ctx"})
    assert sig.param_names == ("value", "flag")
    assert sig.input_schema == {
        "type": "object",
        "properties": {"value": {}, "flag": {"type": "boolean", "default": False}},
        "required": ["value"],
    }
    assert convert_arguments(sig, {"value": [1, {"a": None}]}) == {"value": [1, {"a": None}],
                                                                   "flag": False}


def test_no_parameters() -> None:
    def ping() -> str:
        return "pong"

    sig = signature_schema(ping, skip=())
    assert sig.input_schema == {"type": "object", "properties": {}, "required": []}
    assert convert_arguments(sig, {"extra": 1}) == {}


def test_int_header_and_optional_header() -> None:
    def tool(shard: Annotated[int, Header("Shard")],
             tenant: Annotated[str | None, Header("Tenant")] = None) -> None:
        return None

    props = signature_schema(tool, skip=()).input_schema["properties"]
    assert props == {
        "shard": {"type": "integer", "x-mcp-header": "Shard"},
        "tenant": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None,
                   "x-mcp-header": "Tenant"},
    }


def _float_header(x: Annotated[float, Header("X")]) -> None: ...
def _list_header(x: Annotated[list[str], Header("X")]) -> None: ...
def _bad_token(x: Annotated[str, Header("Bad Name")]) -> None: ...
def _duplicate(a: Annotated[str, Header("Zone")], b: Annotated[str, Header("zone")]) -> None: ...
def _struct_ask(a: Annotated[Address, AskIfMissing()]) -> None: ...
def _varargs(*names: str) -> None: ...
def _kwargs(**names: str) -> None: ...
def _positional(a: str, /) -> None: ...
def _unsupported(a: complex) -> None: ...


@pytest.mark.parametrize(("fn", "match"), [
    (_float_header, "Header needs a str, int or bool"),
    (_list_header, "Header needs a str, int or bool"),
    (_bad_token, "invalid or duplicate header name"),
    (_duplicate, "invalid or duplicate header name 'zone'"),
    (_struct_ask, "AskIfMissing needs a form-friendly type"),
    (_varargs, "must be passable by keyword"),
    (_kwargs, "must be passable by keyword"),
    (_positional, "must be passable by keyword"),
    (_unsupported, "unsupported parameter type"),
])
def test_misuse_raises_type_error(fn: object, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        signature_schema(fn, skip=())  # type: ignore[arg-type]


def test_return_schema_for_object_types() -> None:
    assert return_schema(book) == {
        "type": "object",
        "properties": {"price": {"type": "number"}, "address": {"$ref": "#/$defs/Address"}},
        "required": ["price", "address"],
        "$defs": {"Address": {
            "title": "Address", "type": "object",
            "properties": {"street": {"type": "string"},
                           "city": {"type": "string", "default": "Oslo"}},
            "required": ["street"],
        }},
    }

    def totals() -> Totals:
        return {"total": 1.0}

    def receipt() -> Annotated[Receipt, Meta(description="x")]:
        return Receipt("r")

    assert return_schema(totals) == {"type": "object", "properties": {"total": {"type": "number"}},
                                     "required": ["total"]}
    assert return_schema(receipt) == {"type": "object", "properties": {"rma": {"type": "string"}},
                                      "required": ["rma"]}


def _text() -> str: raise NotImplementedError
def _raw() -> bytes: raise NotImplementedError
def _nothing() -> None: ...
def _unannotated(): ...  # type: ignore[no-untyped-def]
def _listing() -> list[Quote]: raise NotImplementedError
def _mapping() -> dict[str, int]: raise NotImplementedError
def _array_like() -> Point: raise NotImplementedError
def _optional() -> Quote | None: raise NotImplementedError


@pytest.mark.parametrize("fn", [_text, _raw, _nothing, _unannotated, _listing, _mapping,
                                _array_like, _optional])
def test_return_schema_none_for_non_objects(fn: object) -> None:
    assert return_schema(fn) is None  # type: ignore[arg-type]


def test_docstring_summary() -> None:
    def undocumented() -> None: ...

    def wrapped() -> None:
        """
        First line
        continues here.

        Second paragraph.
        """

    assert docstring_summary(book) == "Book a return pickup."
    assert docstring_summary(wrapped) == "First line continues here."
    assert docstring_summary(undocumented) is None


def test_output_checker_names_the_first_problem() -> None:
    check = output_checker({"type": "object", "properties": {"n": {"type": "integer"}},
                            "required": ["n"]})
    assert check({"n": 1}) is None
    assert check({}) == "structuredContent: 'n' is a required property"
    assert check({"n": 1.5}) == "n: 1.5 is not of type 'integer'"


def test_literal_choices_keep_the_order_they_were_written_in_issue_19() -> None:
    def pick(
        team: Literal["red", "blue", "amber"],
        size: Annotated[Literal[3, 1, 2], Meta(description="How many")] = 3,
        note: Literal["later", "now"] | None = None,
    ) -> None: ...

    props = signature_schema(pick, skip=()).input_schema["properties"]
    assert isinstance(props, dict)
    assert props["team"] == {"enum": ["red", "blue", "amber"]}
    assert props["size"]["enum"] == [3, 1, 2]
    assert props["note"]["anyOf"][0] == {"enum": ["later", "now"]}
