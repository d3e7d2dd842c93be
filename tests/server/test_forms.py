"""Forms: rendering to the restricted requestedSchema, answer validation, raw-schema validation."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import logging
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import jsonschema  # type: ignore[import-untyped]
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import Meta

from mrtr import Context, Server
from mrtr.server._forms import (
    Choices,
    Confirmation,
    Email,
    Form,
    FormInvalid,
    Uri,
    render_form,
    validate_against_schema,
)
from mrtr.testing import TestClient, then


class ReturnDetails(Form):
    reason: Literal["broken", "wrong item", "other"]
    email: Annotated[str, Email]
    boxes: Annotated[int, Meta(ge=1, le=5)]
    pickup_date: dt.date


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Everything(Form):
    """Not sent: docstrings never reach the wire."""

    name: Annotated[str, Meta(min_length=2, max_length=10, title="Your name")]
    site: Annotated[str, Uri] = "https://example.com"
    height: Annotated[float, Meta(ge=0.5, le=2.5, description="In metres")] = 1.7
    count: int | None
    subscribe: bool = False
    colour: Colour = Colour.RED
    size: Annotated[Literal["s", "m"], Choices({"s": "Small", "m": "Medium"})] = "m"
    when: dt.datetime | None = None
    toppings: Annotated[list[Literal["ham", "egg", "kale"]], Meta(min_length=1, max_length=2)]
    labels: Annotated[frozenset[Literal["a", "b"]], Choices({"a": "Alpha", "b": "Beta"})] = \
        frozenset({"b"})
    shades: set[Colour] = msgspec.field(default_factory=set)


class Camel(Form, rename="camel"):
    first_name: str
    nick: str = "x"
    age: int


RETURN_SCHEMA = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "title": "Reason", "enum": ["broken", "wrong item", "other"]},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "boxes": {"type": "integer", "title": "Boxes", "minimum": 1, "maximum": 5},
        "pickup_date": {"type": "string", "title": "Pickup date", "format": "date"},
    },
    "required": ["reason", "email", "boxes", "pickup_date"],
}
GOOD = {"reason": "broken", "email": "ann@example.com", "boxes": 2, "pickup_date": "2026-07-28"}
FORMS: list[type[Form]] = [ReturnDetails, Everything, Camel, Confirmation]


def _props(form: type[Form]) -> dict[str, dict[str, Any]]:
    props = form.requested_schema()["properties"]
    assert isinstance(props, dict)
    return props


# --- rendering --------------------------------------------------------------------------------


def test_return_details_renders_exact_schema() -> None:
    assert ReturnDetails.requested_schema() == RETURN_SCHEMA


def test_everything_renders_each_kind() -> None:
    assert _props(Everything) == {
        "name": {"type": "string", "title": "Your name", "minLength": 2, "maxLength": 10},
        "site": {"type": "string", "title": "Site", "format": "uri",
                 "default": "https://example.com"},
        "height": {"type": "number", "title": "Height", "minimum": 0.5, "maximum": 2.5,
                   "description": "In metres", "default": 1.7},
        "count": {"type": "integer", "title": "Count"},
        "subscribe": {"type": "boolean", "title": "Subscribe", "default": False},
        "colour": {"type": "string", "title": "Colour", "enum": ["red", "green"],
                   "default": "red"},
        "size": {"type": "string", "title": "Size", "default": "m",
                 "oneOf": [{"const": "s", "title": "Small"}, {"const": "m", "title": "Medium"}]},
        "when": {"type": "string", "title": "When", "format": "date-time"},
        "toppings": {"type": "array", "title": "Toppings", "minItems": 1, "maxItems": 2,
                     "items": {"type": "string", "enum": ["ham", "egg", "kale"]}},
        "labels": {"type": "array", "title": "Labels", "default": ["b"],
                   "items": {"anyOf": [{"const": "a", "title": "Alpha"},
                                       {"const": "b", "title": "Beta"}]}},
        "shades": {"type": "array", "title": "Shades", "default": [],
                   "items": {"type": "string", "enum": ["red", "green"]}},
    }
    assert Everything.requested_schema()["required"] == ["name", "toppings"]
    assert "Not sent" not in json.dumps(Everything.requested_schema())


def test_rename_uses_wire_names_and_kw_only_is_inherited() -> None:
    assert list(_props(Camel)) == ["firstName", "nick", "age"]
    assert Camel.requested_schema()["required"] == ["firstName", "age"]
    assert Camel.validate_answer({"firstName": "Ann", "age": 3}) == Camel(first_name="Ann", age=3)


def test_confirmation_schema() -> None:
    assert Confirmation.requested_schema() == {
        "type": "object",
        "properties": {"confirm": {"type": "boolean", "title": "Confirm"}},
        "required": ["confirm"],
    }
    assert Confirmation.validate_answer({"confirm": True}).confirm is True


def test_requested_schema_is_a_fresh_copy() -> None:
    schema = ReturnDetails.requested_schema()
    schema["properties"] = {}
    assert ReturnDetails.requested_schema() == RETURN_SCHEMA


def test_schema_digest_is_stable_and_tracks_shape() -> None:
    class Widened(Form):
        reason: Literal["broken", "wrong item", "other"]
        email: Annotated[str, Email]
        boxes: Annotated[int, Meta(ge=1, le=9)]
        pickup_date: dt.date

    assert ReturnDetails.schema_digest() == ReturnDetails.schema_digest()
    assert len(ReturnDetails.schema_digest()) == 16
    assert Widened.schema_digest() != ReturnDetails.schema_digest()


def _strict_match(prop: Mapping[str, Any], definition: Mapping[str, Any]) -> bool:
    """`prop` validates against `definition` and uses no keyword the definition lacks."""
    if not jsonschema.Draft202012Validator(definition).is_valid(prop):
        return False
    if not set(prop) <= set(definition["properties"]):
        return False
    items_def = definition["properties"].get("items", {}).get("properties")
    return "items" not in prop or set(prop["items"]) <= set(items_def or ())


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
def test_rendered_schema_matches_official_definitions(shared_dir: Path, form: type[Form]) -> None:
    spec = json.loads((shared_dir / "spec/schema-2026-07-28/schema.json").read_text())
    defs = spec["$defs"]
    params = {"$defs": defs, "$ref": "#/$defs/ElicitRequestFormParams"}
    jsonschema.Draft202012Validator(params).validate(
        {"mode": "form", "message": "Please", "requestedSchema": form.requested_schema()})
    names = [f"{t}Schema" for t in ("String", "Number", "Boolean", "UntitledSingleSelectEnum",
             "TitledSingleSelectEnum", "UntitledMultiSelectEnum", "TitledMultiSelectEnum")]
    for key, prop in _props(form).items():
        assert any(_strict_match(prop, defs[n]) for n in names), key


# --- unsupported types fail at class definition -----------------------------------------------


class Inner(msgspec.Struct):
    x: int


class Number(enum.Enum):
    ONE = 1


BAD_TYPES: list[object] = [
    Inner, dict[str, int], list[str], list[int], tuple[str, ...], bytes, Literal[1, 2], Number,
    int | str, list[Inner], Annotated[str, Meta(pattern="a+")], Annotated[int, Meta(gt=0)],
    Annotated[int, Email], Annotated[Literal["a"], Choices({"z": "Zed"})],
    Annotated[int, Meta(min_length=1)], Annotated[str, Meta(ge=1)],
    Annotated[dt.date, Meta(min_length=1)],
]


@pytest.mark.parametrize("annotation", BAD_TYPES, ids=repr)
def test_unsupported_field_types_raise_at_definition(annotation: object) -> None:
    with pytest.raises(TypeError, match="Bad.field"):
        types.new_class("Bad", (Form,), exec_body=lambda ns: ns.update(
            __annotations__={"field": annotation}, __module__=__name__))


def test_unresolvable_annotation_raises_type_error() -> None:
    with pytest.raises(TypeError, match="module level"):
        class Local(Form):
            x: Undefined  # type: ignore[name-defined]  # noqa: F821


# --- validate_answer --------------------------------------------------------------------------


def test_good_answer_builds_typed_form() -> None:
    answer = ReturnDetails.validate_answer({**GOOD, "boxes": 3.0, "unknown": [1]})
    assert answer == ReturnDetails(reason="broken", email="ann@example.com", boxes=3,
                                   pickup_date=dt.date(2026, 7, 28))
    assert type(answer.boxes) is int


def test_missing_optional_fields_take_defaults() -> None:
    got = Everything.validate_answer({"name": "Ann", "toppings": ["egg"], "height": 2})
    assert got == Everything(name="Ann", count=None, toppings=["egg"], height=2.0)
    assert got.colour is Colour.RED and got.labels == frozenset({"b"})


def test_answer_values_are_converted() -> None:
    got = Everything.validate_answer({
        "name": "Ann", "toppings": ["ham", "kale"], "colour": "green", "labels": ["a", "b"],
        "when": "2026-07-28T09:30:00Z", "shades": ["red"], "count": None, "size": "s",
    })
    assert got.colour is Colour.GREEN and got.shades == {Colour.RED}
    assert got.labels == frozenset({"a", "b"}) and got.count is None
    assert got.when == dt.datetime(2026, 7, 28, 9, 30, tzinfo=dt.UTC)


BAD_ANSWERS = [
    ({"reason": "lost"}, "reason: must be one of: broken, wrong item, other"),
    ({"reason": 3}, "reason: must be text"),
    ({"email": "ann@example"}, "email: must be a valid email address (the part after the "
                                "@-sign is not valid. It should have a period)"),
    ({"email": "ann example@x.com"}, "email: must be a valid email address (the email address "
                                      "contains invalid characters before the @-sign: SPACE)"),
    ({"email": "a@b@c.com"}, "email: must be a valid email address (the part after the @-sign "
                              "contains invalid characters: '@')"),
    # Issue #26: the hand-written pattern let these through (one was booked from a terminal).
    ({"email": "ann@example..com"}, "email: must be a valid email address (an email address "
                                     "cannot have two periods in a row)"),
    ({"email": ".ann@example.com"}, "email: must be a valid email address (an email address "
                                     "cannot start with a period)"),
    ({"email": "ann@-example.com"}, "email: must be a valid email address (an email address "
                                     "cannot have a hyphen immediately after the @-sign)"),
    ({"boxes": 6}, "boxes: must be at most 5"),
    ({"boxes": 0}, "boxes: must be at least 1"),
    ({"boxes": 2.5}, "boxes: must be a whole number"),
    ({"boxes": "2"}, "boxes: must be a whole number"),
    ({"boxes": True}, "boxes: must be a whole number"),
    ({"pickup_date": "28/07/2026"}, "pickup_date: must be a date such as 2026-07-28"),
    ({"pickup_date": "2026-02-30"}, "pickup_date: must be a date such as 2026-07-28"),
]


@pytest.mark.parametrize(("change", "message"), BAD_ANSWERS, ids=lambda v: str(v))
def test_bad_answer_is_rejected_with_a_human_message(change: dict[str, object],
                                                     message: str) -> None:
    with pytest.raises(FormInvalid) as info:
        ReturnDetails.validate_answer({**GOOD, **change})
    assert info.value.message == message
    assert str(info.value) == message


def test_missing_required_fields_are_all_named() -> None:
    with pytest.raises(FormInvalid) as info:
        ReturnDetails.validate_answer({"boxes": 9})
    assert info.value.problems == {"reason": "is required", "email": "is required",
                                   "boxes": "must be at most 5", "pickup_date": "is required"}
    assert info.value.message.startswith("reason: is required; email: is required; boxes:")


EVERYTHING_BAD = [
    ({"name": "A"}, "name: must be at least 2 characters long"),
    ({"name": "A" * 11}, "name: must be at most 10 characters long"),
    ({"site": "not a uri"}, "site: must be a valid URI, such as https://example.com"),
    ({"site": "example.com"}, "site: must be a valid URI, such as https://example.com"),
    ({"height": 3}, "height: must be at most 2.5"),
    ({"subscribe": "yes"}, "subscribe: must be true or false"),
    ({"toppings": []}, "toppings: must have at least 1 selected"),
    ({"toppings": ["ham", "egg", "kale"]}, "toppings: must have at most 2 selected"),
    ({"toppings": ["ham", "spam"]}, "toppings: each choice must be one of: ham, egg, kale"),
    ({"toppings": "ham"}, "toppings: must be a list of choices"),
    ({"labels": ["c"]}, "labels: each choice must be one of: Alpha, Beta"),
    ({"size": "l"}, "size: must be one of: Small, Medium"),
    ({"when": "2026-07-28"}, "when: must be a date and time such as 2026-07-28T09:30:00Z"),
]


@pytest.mark.parametrize(("change", "message"), EVERYTHING_BAD, ids=lambda v: str(v))
def test_every_kind_has_a_human_message(change: dict[str, object], message: str) -> None:
    with pytest.raises(FormInvalid) as info:
        Everything.validate_answer({"name": "Ann", "toppings": ["ham"], **change})
    assert info.value.message == message


def test_content_must_be_an_object() -> None:  # the engine decodes content as JSON
    with pytest.raises(FormInvalid, match="content: must be an object"):
        ReturnDetails.validate_answer([1, 2])  # type: ignore[arg-type]


# --- raw requestedSchema (guard style) --------------------------------------------------------

RAW = {
    "type": "object",
    "properties": {
        "plan": {"type": "string", "oneOf": [{"const": "p", "title": "Pro"},
                                             {"const": "f", "title": "Free"}]},
        "seats": {"type": "integer", "minimum": 1, "default": 1},
        "extras": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X-ray"}]}},
        "contact": {"type": "string", "format": "email"},
    },
    "required": ["plan"],
}


def test_raw_schema_accepts_normalises_and_fills_defaults() -> None:
    got = validate_against_schema(RAW, {"plan": "p", "extras": ["x"], "junk": 1})
    assert got == {"plan": "p", "seats": 1, "extras": ["x"]}
    assert validate_against_schema(RAW, {"plan": "f", "seats": 4.0})["seats"] == 4


@pytest.mark.parametrize(("content", "message"), [
    ({}, "plan: is required"),
    ({"plan": "z"}, "plan: must be one of: Pro, Free"),
    ({"plan": "p", "seats": 0}, "seats: must be at least 1"),
    ({"plan": "p", "seats": 1.5}, "seats: must be a whole number"),
    ({"plan": "p", "extras": ["y"]}, "extras: each choice must be one of: X-ray"),
    ({"plan": "p", "contact": "nobody"},
     "contact: must be a valid email address (an email address must have an @-sign)"),
    ({"plan": "p", "contact": "ann@example..com"},
     "contact: must be a valid email address (an email address cannot have two periods in a row)"),
    ({"plan": 1, "seats": "many"}, "plan: must be text; seats: must be a whole number"),
])
def test_raw_schema_rejects_with_human_messages(content: dict[str, object], message: str) -> None:
    with pytest.raises(FormInvalid) as info:
        validate_against_schema(RAW, content)
    assert info.value.message == message


def test_raw_schema_agrees_with_rendered_forms() -> None:
    assert validate_against_schema(ReturnDetails.requested_schema(), GOOD) == GOOD
    with pytest.raises(FormInvalid, match="boxes: must be at most 5"):
        validate_against_schema(ReturnDetails.requested_schema(), {**GOOD, "boxes": 7})


# --- property: random valid answers validate and round-trip -----------------------------------


def _value(prop: Mapping[str, Any]) -> st.SearchStrategy[object]:
    kind, fmt = prop["type"], prop.get("format")
    if kind == "array":
        items = prop["items"]
        options = items.get("enum") or [o["const"] for o in items["anyOf"]]
        return st.lists(st.sampled_from(options), unique=True, min_size=prop.get("minItems", 0),
                        max_size=prop.get("maxItems", len(options)))
    if "enum" in prop or "oneOf" in prop:
        return st.sampled_from(prop.get("enum") or [o["const"] for o in prop["oneOf"]])
    if kind == "boolean":
        return st.booleans()
    if kind in ("integer", "number"):
        low, high = prop.get("minimum"), prop.get("maximum")
        ints = st.integers(min_value=None if low is None else int(-(-low // 1)),
                           max_value=None if high is None else int(high // 1))
        if kind == "integer":
            return ints | ints.map(float)
        return ints | st.floats(low, high, allow_nan=False, allow_infinity=False)
    strategies: dict[object, st.SearchStrategy[str]] = {
        "email": st.emails(),
        "uri": st.from_regex(r"https://[a-z]{1,12}\.example(/[a-z0-9._~-]{0,10})?", fullmatch=True),
        "date": st.dates().map(dt.date.isoformat),
        "date-time": st.datetimes(min_value=dt.datetime(1900, 1, 1),
                                  timezones=st.just(dt.UTC)).map(dt.datetime.isoformat),
    }
    if fmt in strategies:
        return strategies[fmt]
    return st.text(min_size=prop.get("minLength", 0), max_size=prop.get("maxLength", 20))


def _answers(form: type[Form]) -> st.SearchStrategy[dict[str, object]]:
    required = set(typing.cast(list[str], form.requested_schema()["required"]))
    props = _props(form)
    fixed = {k: _value(p) for k, p in props.items() if k in required}
    optional = {k: _value(p) for k, p in props.items() if k not in required}
    return st.fixed_dictionaries(fixed, optional=optional)


def _same(prop: Mapping[str, object], sent: object, got: object) -> bool:
    if isinstance(sent, list):
        return isinstance(got, list) and sorted(sent) == sorted(got)
    if prop.get("format") == "date-time":
        return dt.datetime.fromisoformat(str(sent)) == dt.datetime.fromisoformat(str(got))
    return sent == got


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_valid_answers_round_trip(form: type[Form], data: st.DataObject) -> None:
    content = data.draw(_answers(form))
    built = form.validate_answer(content)
    dumped = msgspec.to_builtins(built)  # wire names, ISO dates, sets as lists
    props = _props(form)
    for key, sent in content.items():
        assert _same(props[key], sent, dumped[key]), key
    assert form.validate_answer(dumped) == built
    validate_against_schema(form.requested_schema(), content)


# --- the fast path (msgspec alone) agrees with the checker ------------------------------------


class Plain(Form, rename="camel"):
    """Every kind of field without a `format`: its answers take the msgspec-only fast path."""

    full_name: Annotated[str, Meta(min_length=2, max_length=6)]
    boxes: Annotated[int, Meta(ge=1, le=5)] = 1
    height: Annotated[float, Meta(ge=0.5, le=2.5)] = 1.7
    subscribe: bool = False
    count: int | None
    colour: Colour = Colour.RED
    size: Annotated[Literal["s", "m"], Choices({"s": "Small", "m": "Medium"})] = "m"
    toppings: Annotated[list[Literal["ham", "egg"]], Meta(min_length=1, max_length=2)] = \
        msgspec.field(default_factory=lambda: ["ham"])
    shades: set[Colour] = msgspec.field(default_factory=set)


_ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 9), st.sampled_from([1.0, 3.0, 0.75, 2.4, 9.5]),
    st.text(max_size=8), st.sampled_from(["s", "m", "red", "green", "ham", "egg", "Ann"]),
    st.lists(st.sampled_from(["ham", "egg", "kale", "red", "green", 3]), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_PLAIN_KEYS = ["fullName", "boxes", "height", "subscribe", "count", "colour", "size", "toppings",
               "shades", "extra"]


def _through_checker(form: type[Form], content: Mapping[str, object]) -> object:
    spec = form._form_spec
    values = spec.checker.check(content)
    for key in spec.nullable:
        values.setdefault(key, None)
    try:
        return msgspec.convert(values, form)
    except msgspec.ValidationError as exc:
        raise FormInvalid({"content": str(exc)}) from None


def test_only_forms_without_formats_take_the_fast_path() -> None:
    assert Plain._form_spec.direct and Confirmation._form_spec.direct
    assert not ReturnDetails._form_spec.direct and not Everything._form_spec.direct


@settings(max_examples=400, deadline=None)
@given(content=st.dictionaries(st.sampled_from(_PLAIN_KEYS), _ANY_VALUE, max_size=10))
def test_fast_path_accepts_exactly_what_the_checker_accepts(content: dict[str, object]) -> None:
    try:
        expected: object = _through_checker(Plain, content)
    except FormInvalid:
        expected = FormInvalid
    try:
        got: object = Plain.validate_answer(content)
    except FormInvalid:
        got = FormInvalid
    assert got == expected


def test_fast_path_still_normalises_and_explains() -> None:
    base = {"fullName": "Ann", "count": None}
    assert Plain.validate_answer({**base, "boxes": 3.0}).boxes == 3  # 3.0 goes via the checker
    with pytest.raises(FormInvalid) as caught:
        Plain.validate_answer({**base, "boxes": 7})
    assert "boxes" in caught.value.problems


# --- issue 19: dataclasses, TypedDicts and msgspec Structs as forms ---------------------------


@dataclasses.dataclass(kw_only=True)
class EverythingData:
    """`Everything` as a dataclass: it renders, validates and explains the same way."""

    name: Annotated[str, Meta(min_length=2, max_length=10, title="Your name")]
    site: Annotated[str, Uri] = "https://example.com"
    height: Annotated[float, Meta(ge=0.5, le=2.5, description="In metres")] = 1.7
    count: int | None
    subscribe: bool = False
    colour: Colour = Colour.RED
    size: Annotated[Literal["s", "m"], Choices({"s": "Small", "m": "Medium"})] = "m"
    when: dt.datetime | None = None
    toppings: Annotated[list[Literal["ham", "egg", "kale"]], Meta(min_length=1, max_length=2)]
    labels: Annotated[frozenset[Literal["a", "b"]], Choices({"a": "Alpha", "b": "Beta"})] = \
        frozenset({"b"})
    shades: set[Colour] = dataclasses.field(default_factory=set)
    internal: int = dataclasses.field(default=0, init=False)  # not asked: not in __init__


class EverythingStruct(msgspec.Struct, kw_only=True):
    name: Annotated[str, Meta(min_length=2, max_length=10, title="Your name")]
    site: Annotated[str, Uri] = "https://example.com"
    height: Annotated[float, Meta(ge=0.5, le=2.5, description="In metres")] = 1.7
    count: int | None
    subscribe: bool = False
    colour: Colour = Colour.RED
    size: Annotated[Literal["s", "m"], Choices({"s": "Small", "m": "Medium"})] = "m"
    when: dt.datetime | None = None
    toppings: Annotated[list[Literal["ham", "egg", "kale"]], Meta(min_length=1, max_length=2)]
    labels: Annotated[frozenset[Literal["a", "b"]], Choices({"a": "Alpha", "b": "Beta"})] = \
        frozenset({"b"})
    shades: set[Colour] = msgspec.field(default_factory=set)


class Signup(TypedDict):
    name: Annotated[str, Meta(min_length=2)]
    team: Literal["red", "blue"]
    email: NotRequired[Annotated[str, Email]]
    age: int | None


class Extras(TypedDict, total=False):
    note: str


class SignupMore(Signup, Extras):
    pass


class CamelStruct(msgspec.Struct, rename="camel"):
    first_name: str
    age: int


class NotAForm:
    name: str


@dataclasses.dataclass
class BadData:
    inner: Inner


OTHER_FORMS: list[type[Any]] = [EverythingData, EverythingStruct]


@pytest.mark.parametrize("form", OTHER_FORMS, ids=lambda f: f.__name__)
def test_19_dataclass_and_struct_render_like_the_form(form: type[Any]) -> None:
    rendered = render_form(form)
    assert rendered.schema == Everything.requested_schema()
    assert rendered.digest == Everything.schema_digest()
    assert render_form(form) is rendered  # rendered once per type


@pytest.mark.parametrize("form", OTHER_FORMS, ids=lambda f: f.__name__)
def test_19_dataclass_and_struct_answers_build_the_given_type(form: type[Any]) -> None:
    content = {"name": "Ann", "toppings": ["ham", "kale"], "colour": "green", "labels": ["a"],
               "when": "2026-07-28T09:30:00Z", "shades": ["red"], "height": 2}
    got: Any = render_form(form).validate(content)
    assert type(got) is form
    assert got.colour is Colour.GREEN and got.shades == {Colour.RED} and got.count is None
    assert got.labels == frozenset({"a"}) and got.height == 2.0
    assert got.when == dt.datetime(2026, 7, 28, 9, 30, tzinfo=dt.UTC)
    expected = msgspec.to_builtins(Everything.validate_answer(content))
    assert {k: v for k, v in msgspec.to_builtins(got).items() if k != "internal"} == expected


@pytest.mark.parametrize("form", OTHER_FORMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize(("change", "message"), EVERYTHING_BAD, ids=lambda v: str(v))
def test_19_dataclass_and_struct_explain_bad_answers_like_the_form(
        form: type[Any], change: dict[str, object], message: str) -> None:
    with pytest.raises(FormInvalid) as info:
        render_form(form).validate({"name": "Ann", "toppings": ["ham"], **change})
    assert info.value.message == message


@settings(max_examples=60, deadline=None)
@given(content=_answers(Everything))
def test_19_dataclass_and_struct_agree_with_the_form_on_any_valid_answer(
        content: dict[str, object]) -> None:
    expected = msgspec.structs.asdict(Everything.validate_answer(content))
    for form in OTHER_FORMS:
        got = render_form(form).validate(content)
        assert {name: getattr(got, name) for name in expected} == expected


def test_19_typeddict_renders_required_and_not_required_keys() -> None:
    assert render_form(SignupMore).schema == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 2},
            "team": {"type": "string", "title": "Team", "enum": ["red", "blue"]},
            "email": {"type": "string", "title": "Email", "format": "email"},
            "age": {"type": "integer", "title": "Age"},
            "note": {"type": "string", "title": "Note"},
        },
        "required": ["name", "team"],  # age is `int | None`: absent means None
    }


def test_19_typeddict_answers_are_dicts() -> None:
    rendered = render_form(Signup)
    assert rendered.validate({"name": "Ann", "team": "red"}) == {
        "name": "Ann", "team": "red", "age": None}
    got = rendered.validate({"name": "Ann", "team": "red", "age": 3.0, "email": "a@b.io"})
    assert got == {"name": "Ann", "team": "red", "age": 3, "email": "a@b.io"}
    with pytest.raises(FormInvalid) as info:
        rendered.validate({"name": "A", "team": "green", "email": "nope"})
    assert info.value.problems == {"name": "must be at least 2 characters long",
                                   "team": "must be one of: red, blue",
                                   "email": "must be a valid email address (an email "
                                            "address must have an @-sign)"}


def test_19_struct_uses_wire_names() -> None:
    rendered = render_form(CamelStruct)
    assert list(typing.cast(dict[str, object], rendered.schema["properties"])) == [
        "firstName", "age"]
    assert rendered.validate({"firstName": "Ann", "age": 3}) == CamelStruct("Ann", 3)


def test_19_a_form_renders_to_its_own_spec() -> None:
    assert render_form(ReturnDetails) is ReturnDetails._form_spec
    assert render_form(Confirmation).validate({"confirm": True}) == Confirmation(confirm=True)


@pytest.mark.parametrize("form", [NotAForm, int, dict, 3, "Signup", None, Signup(
    name="Ann", team="red", age=None), list[int]], ids=repr)
def test_19_anything_else_is_rejected_naming_mrtr_form(form: Any) -> None:
    with pytest.raises(TypeError, match=r"needs a form type: a mrtr\.Form subclass, a dataclass"):
        render_form(form)


def test_19_unsupported_fields_of_other_types_are_named() -> None:
    with pytest.raises(TypeError, match="BadData.inner: unsupported form field type"):
        render_form(BadData)

    class ArrayLike(msgspec.Struct, array_like=True):
        x: int

    with pytest.raises(TypeError, match="array_like"):
        render_form(ArrayLike)


@dataclasses.dataclass
class Booking:
    seats: Annotated[int, Meta(ge=1, le=4)]
    team: Literal["red", "blue"] = "red"


class BookingDict(TypedDict):
    seats: Annotated[int, Meta(ge=1, le=4)]
    team: NotRequired[Literal["red", "blue"]]


class BookingStruct(msgspec.Struct):
    seats: Annotated[int, Meta(ge=1, le=4)]
    team: Literal["red", "blue"] = "red"


def _elicit_app(form: type[Any]) -> Server:
    app = Server("forms")

    @app.tool
    async def book(ctx: Context) -> str:
        got: Any = await ctx.elicit("How many seats?", form, key="seats")
        if isinstance(got, dict):
            return f"dict {got['seats']} {got.get('team', '-')}"
        return f"{type(got).__name__} {got.seats} {got.team}"

    return app


@pytest.mark.parametrize(("form", "text"), [
    (Booking, "Booking 3 red"), (BookingDict, "dict 3 -"), (BookingStruct, "BookingStruct 3 red"),
], ids=lambda v: getattr(v, "__name__", v))
def test_19_elicit_accepts_dataclass_typeddict_struct_and_reasks(form: type, text: str) -> None:
    with TestClient(_elicit_app(form)) as client:
        flow = client.call_tool("book", answers={"seats": then({"seats": 9}, {"seats": 3})})
    assert flow.text == text and flow.rounds == 3
    first = flow.asked(1)["seats"]["params"]
    assert first["requestedSchema"] == render_form(form).schema
    assert first["requestedSchema"]["properties"]["seats"]["maximum"] == 4
    assert flow.asked(2)["seats"]["params"]["message"].startswith("seats: must be at most 4")


@pytest.mark.parametrize("form", [NotAForm, int], ids=lambda v: v.__name__)
def test_19_elicit_rejects_other_types_naming_mrtr_form(
        form: type, caplog: pytest.LogCaptureFixture) -> None:
    with TestClient(_elicit_app(form)) as client, caplog.at_level(logging.ERROR):
        flow = client.call_tool("book")
    assert flow.result["isError"] is True and flow.rounds == 1
    assert "mrtr.Form" not in flow.text  # the reason goes to the server log only
    assert ("ctx.elicit() needs a form type: a mrtr.Form subclass, a dataclass, a TypedDict, a "
            f"msgspec.Struct or a pydantic model, not {form.__qualname__}") in caplog.text


def test_19_docs_example_of_dataclass_and_typeddict_forms_runs() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "server.md"
    section = docs.read_text().split("### Forms from dataclasses, TypedDicts and Structs", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    ns: dict[str, Any] = {"__name__": "docs_forms"}
    exec(compile(code, str(docs), "exec", dont_inherit=True), ns)  # as a user file would run
    with TestClient(ns["app"]) as client:
        flow = client.call_tool("book", answers={
            "elicit-1": then({"seats": 5}, {"seats": 2, "team": "blue"}),
            "elicit-2": {"text": "window seats", "urgent": True}})
    assert flow.text == "2 seat(s) for team blue: window seats (urgent)"
    assert flow.asked(2)["elicit-1"]["params"]["message"].startswith("seats: must be at most 4")


# --- #26: Email follows email-validator, in a real round too ---------------------------------

BAD_EMAILS = ["ann@example..com", ".ann@example.com", "ann@-example.com"]


class Contact(Form):
    email: Annotated[str, Email]


def _contact_app() -> Server:
    app = Server("emails")

    @app.tool
    async def book(ctx: Context) -> str:
        return f"booked for {(await ctx.elicit('Your email?', Contact, key='email')).email}"

    @app.tool
    async def book_raw(ctx: Context) -> str:
        got = await ctx.elicit_schema("Your email?", Contact.requested_schema(), key="email")
        return f"booked for {got['email']}"

    return app


@pytest.mark.parametrize("tool", ["book", "book_raw"])
@pytest.mark.parametrize("bad", BAD_EMAILS)
def test_26_a_bad_email_answer_is_asked_again_with_the_reason(tool: str, bad: str) -> None:
    with TestClient(_contact_app()) as client:
        flow = client.call_tool(tool, answers={
            "email": then({"email": bad}, {"email": "ann@example.com"})})
    assert flow.text == "booked for ann@example.com" and flow.rounds == 3
    again = flow.asked(2)["email"]["params"]["message"]
    assert again.startswith("email: must be a valid email address (an email address cannot ")
    assert again.endswith("\n\nYour email?")


@pytest.mark.parametrize("good", ["ann@example.com", "ann.lee+returns@mail.example.co.uk",
                                  "o'brien@example.org", "ann@bücher.de", "a@b.io"])
def test_26_good_emails_still_pass(good: str) -> None:
    assert Contact.validate_answer({"email": good}).email == good
    assert validate_against_schema(Contact.requested_schema(), {"email": good}) == {
        "email": good}
