"""Declarative elicitation forms rendered once to the restricted `requestedSchema` dialect.

Implements MCP 2026-07-28 client/elicitation form mode: flat primitive properties only.
"""

# Design: a Form subclass is analysed once, when the class is created (by the metaclass, because
# msgspec fills in fields and defaults only after `type.__new__` has run `__init_subclass__`).
# The rendered schema is kept as JSON bytes: decoding them per round is cheap and hands every
# caller a fresh dict, so nobody can mutate the class's copy. Answers are checked against the
# rendered property dicts (one checker, human messages), then built with one msgspec.convert.
from __future__ import annotations

import datetime as dt
import enum
import functools
import hashlib
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self, dataclass_transform
from urllib.parse import urlsplit

import jsonschema  # type: ignore[import-untyped]
import msgspec

__all__ = [
    "Choices",
    "Confirmation",
    "Email",
    "Form",
    "FormInvalid",
    "StringFormat",
    "Uri",
    "validate_against_schema",
]

Property = dict[str, object]


class FormInvalid(ValueError):
    """An elicitation answer does not match the form; `message` is fit to show the user."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        self.message = "; ".join(f"{key}: {text}" for key, text in self.problems.items())
        super().__init__(self.message)


@dataclass(frozen=True, slots=True)
class StringFormat:
    """Annotated marker for a string `format` (use the `Email` and `Uri` instances)."""

    name: Literal["email", "uri"]


Email = StringFormat("email")
Uri = StringFormat("uri")


class Choices:
    """Annotated marker giving display titles to enum options: `Choices({"value": "Title"})`."""

    __slots__ = ("titles",)

    def __init__(self, titles: Mapping[str, str]) -> None:
        self.titles: tuple[tuple[str, str], ...] = tuple(titles.items())


_SCALARS = (  # Python type → (JSON type, format); bool before int, datetime before date
    (bool, "boolean", None), (int, "integer", None), (float, "number", None),
    (str, "string", None), (dt.datetime, "string", "date-time"), (dt.date, "string", "date"),
)
_META_KEYS = (  # msgspec.Meta attribute → (string/number keyword, multi-select keyword)
    ("min_length", "minLength", "minItems"), ("max_length", "maxLength", "maxItems"),
    ("ge", "minimum", "minimum"), ("le", "maximum", "maximum"),
)
_UNSUPPORTED_META = ("gt", "lt", "multiple_of", "pattern", "extra_json_schema")


def humanise(name: str) -> str:
    """`pickup_date` / `pickupDate` → `Pickup date`."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").split()
    text = " ".join(words).lower()
    return text[:1].upper() + text[1:]


def unwrap(annotation: object) -> tuple[object, list[object], bool]:
    """Strip Annotated and `| None`: (base type, metadata, nullable)."""
    extras: list[object] = []
    nullable = False
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            extras.extend(annotation.__metadata__)  # type: ignore[attr-defined]
            annotation = typing.get_args(annotation)[0]
        elif typing.get_origin(annotation) in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                raise TypeError(f"unions other than `X | None` are not supported: {annotation}")
            nullable, annotation = True, members[0]
        else:
            return annotation, extras, nullable


def _options(tp: object) -> list[str] | None:
    """The string options of a Literal or str-valued Enum, else None."""
    if typing.get_origin(tp) is Literal:
        values = list(typing.get_args(tp))
    elif isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [member.value for member in tp]
    else:
        return None
    if not values or not all(isinstance(v, str) for v in values):
        raise TypeError(f"enum options must be strings: {tp}")
    return values


def _choice_schema(options: list[str], choices: Choices | None, key: str) -> Property:
    if choices is None:
        return {"enum": options}
    titles = dict(choices.titles)
    if unknown := sorted(set(titles) - set(options)):
        raise TypeError(f"Choices names values that are not options: {unknown}")
    return {key: [{"const": v, "title": titles.get(v, v)} for v in options]}


def _base_property(tp: object, extras: list[object]) -> Property:
    choices = next((m for m in extras if isinstance(m, Choices)), None)
    fmt = next((m.name for m in extras if isinstance(m, StringFormat)), None)
    if (options := _options(tp)) is not None:
        return {"type": "string", **_choice_schema(options, choices, "oneOf")}
    if typing.get_origin(tp) in (list, set, frozenset):
        (item,) = typing.get_args(tp) or (None,)
        if (options := _options(item)) is None:
            raise TypeError(f"multi-select needs Literal or Enum items, not {item}")
        items = _choice_schema(options, choices, "anyOf")  # titled items carry no "type"
        return {"type": "array", "items": items if choices else {"type": "string", **items}}
    for scalar, kind, implied in _SCALARS:
        if tp is scalar:
            if fmt is not None and tp is not str:
                raise TypeError(f"{fmt} marker needs a str field, not {tp}")
            return {"type": kind, "format": fmt or implied} if fmt or implied else {"type": kind}
    raise TypeError(f"unsupported form field type {tp!r}: use str, int, float, bool, date, "
                    "datetime, Literal/Enum of str, or a list/set of those")


def _apply_meta(prop: Property, metas: list[msgspec.Meta]) -> None:
    is_array = prop["type"] == "array"
    textual = is_array or prop["type"] == "string" and prop.get("format") not in _TEMPORAL
    for meta in metas:
        for attr in _UNSUPPORTED_META:
            if getattr(meta, attr) is not None:
                raise TypeError(f"Meta({attr}=...) cannot be expressed in an elicitation schema")
        for attr, scalar_key, array_key in _META_KEYS:
            value = getattr(meta, attr)
            if value is None:
                continue
            if attr.endswith("length") != textual:
                raise TypeError(f"Meta({attr}=...) does not apply to a {prop['type']} field")
            prop[array_key if is_array else scalar_key] = value
        if meta.title is not None:
            prop["title"] = meta.title
        if meta.description is not None:
            prop["description"] = meta.description


def _json_default(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(_json_default(v) for v in value)  # type: ignore[type-var]
    if isinstance(value, (list, tuple)):
        return [_json_default(v) for v in value]
    return value


def field_property(name: str, annotation: object, default: object = msgspec.NODEFAULT) -> Property:
    """Render one field or parameter type to a restricted-dialect property.

    Raises TypeError when the type has no form in the restricted elicitation schema.
    """
    tp, extras, _ = unwrap(annotation)
    prop: Property = {"type": "", "title": humanise(name)}
    prop.update(_base_property(tp, extras))
    _apply_meta(prop, [m for m in extras if isinstance(m, msgspec.Meta)])
    if default is not msgspec.NODEFAULT and default is not None:
        prop["default"] = _json_default(default)
    return prop


_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_FORMATS = ("email", "uri", "date", "date-time")
_TEMPORAL = ("date", "date-time")
_MESSAGES = types.MappingProxyType({
    "required": "is required", "string": "must be text", "integer": "must be a whole number",
    "number": "must be a number", "boolean": "must be true or false",
    "array": "must be a list of choices",
    "minLength": "must be at least {} characters long",
    "maxLength": "must be at most {} characters long",
    "minimum": "must be at least {}", "maximum": "must be at most {}",
    "minItems": "must have at least {} selected", "maxItems": "must have at most {} selected",
    "email": "must be a valid email address",
    "uri": "must be a valid URI, such as https://example.com",
    "date": "must be a date such as 2026-07-28",
    "date-time": "must be a date and time such as 2026-07-28T09:30:00Z",
})


def format_ok(fmt: str, value: object) -> bool:
    """Whether a string `value` is a pragmatic match for `format` (non-strings pass)."""
    if not isinstance(value, str):
        return True
    try:
        if fmt == "email":
            return _EMAIL.fullmatch(value) is not None
        if fmt == "uri":
            parts = urlsplit(value)
            return (_SCHEME.fullmatch(parts.scheme) is not None and not re.search(r"\s", value)
                    and bool(parts.netloc or parts.path))
        if fmt in _TEMPORAL:  # msgspec's RFC 3339 parser: the one that builds the Form
            msgspec.convert(value, dt.date if fmt == "date" else dt.datetime)
    except (ValueError, msgspec.ValidationError):
        return False
    return True


def _option_labels(prop: Mapping[str, object]) -> list[str]:
    titled = prop.get("oneOf") or prop.get("anyOf")
    if isinstance(titled, list):
        return [str(o.get("title", o.get("const"))) for o in titled if isinstance(o, dict)]
    return [str(v) for v in typing.cast(list[object], prop.get("enum") or [])]


def describe(keyword: str, prop: Mapping[str, object]) -> str:
    """A human sentence for a failed schema keyword on a property."""
    if keyword == "enum":
        return f"must be one of: {', '.join(_option_labels(prop))}"
    if keyword == "items":
        items = prop.get("items")
        labels = _option_labels(items) if isinstance(items, dict) else []
        return f"each choice must be one of: {', '.join(labels)}"
    if keyword == "format":
        return _MESSAGES.get(str(prop.get("format")), "has an invalid format")
    if keyword == "type":
        return _MESSAGES.get(str(prop.get("type")), "has the wrong type")
    return _MESSAGES.get(keyword, "is invalid").format(prop.get(keyword))


def _explain(error: Any, props: Mapping[str, Mapping[str, object]]) -> list[tuple[str, str]]:
    """(property, human sentence) pairs for one jsonschema ValidationError."""
    path = list(error.absolute_path)
    keyword = str(error.validator)
    if keyword == "required" and isinstance(error.instance, Mapping):
        wanted = typing.cast(list[str], error.validator_value)
        return [(n, _MESSAGES[keyword]) for n in wanted if n not in error.instance]
    if not path:
        return [("content", str(error.message))]
    key = str(path[0])
    if keyword in ("oneOf", "anyOf", "const", "enum"):
        keyword = "enum" if len(path) == 1 else "items"
    elif len(path) > 1:
        keyword = "items"
    if keyword in _MESSAGES or keyword in ("enum", "items", "format", "type"):
        return [(key, describe(keyword, props.get(key, {})))]
    return [(key, str(error.message))]


class _Checker:
    """A compiled Draft 2020-12 validator for one `requestedSchema`, with human errors."""

    __slots__ = ("props", "validator")

    def __init__(self, schema: Mapping[str, object]) -> None:
        formats = jsonschema.FormatChecker(formats=())
        for fmt in _FORMATS:
            formats.checks(fmt)(functools.partial(format_ok, fmt))
        self.validator = jsonschema.Draft202012Validator(schema, format_checker=formats)
        self.props = typing.cast(Mapping[str, Mapping[str, object]],
                                 schema.get("properties") or {})

    def check(self, content: Mapping[str, object]) -> dict[str, object]:
        """Known properties of `content`, normalised, with defaults. Raises FormInvalid."""
        if not isinstance(content, Mapping):
            raise FormInvalid({"content": "must be an object"})
        present = {k: v for k, v in content.items() if v is not None}
        problems: dict[str, str] = {}
        for error in self.validator.iter_errors(present):
            for key, text in _explain(error, self.props):
                problems.setdefault(key, text)
        if problems:
            order = {key: i for i, key in enumerate(self.props)}
            raise FormInvalid(dict(sorted(problems.items(), key=lambda kv: order.get(kv[0], -1))))
        out: dict[str, object] = {}
        for key, prop in self.props.items():
            value = present.get(key, prop.get("default"))
            if isinstance(value, float) and prop.get("type") == "integer":
                value = int(value)
            if key in present or "default" in prop:
                out[key] = value
        return out


def validate_against_schema(schema: Mapping[str, object],
                            content: Mapping[str, object]) -> dict[str, object]:
    """Validate `content` against a raw `requestedSchema` (JSON Schema 2020-12).

    Returns the known properties (3.0 → 3 for integers, absent ones with a `default` filled in).
    Raises FormInvalid with one human sentence per failing property.
    """
    return _Checker(schema).check(content)


@dataclass(frozen=True, slots=True)
class _Spec:
    schema_json: bytes
    digest: str
    checker: _Checker
    nullable: tuple[str, ...]  # `X | None` without a default: absent means None


def _render(cls: type[msgspec.Struct]) -> _Spec:
    try:
        infos = msgspec.structs.fields(cls)
    except NameError as exc:
        raise TypeError(f"{cls.__qualname__}: cannot resolve an annotation ({exc}); define the "
                        "form and the types it uses at module level") from None
    props: dict[str, object] = {}
    required: list[str] = []
    nullable: list[str] = []
    for info in infos:
        default = info.default
        if info.default_factory is not msgspec.NODEFAULT:
            default = info.default_factory()
        try:
            props[info.encode_name] = field_property(info.name, info.type, default)
        except TypeError as exc:
            raise TypeError(f"{cls.__qualname__}.{info.name}: {exc}") from None
        if info.required:
            (nullable if unwrap(info.type)[2] else required).append(info.encode_name)
    schema = {"type": "object", "properties": props, "required": required}
    digest = hashlib.sha256(msgspec.json.encode(schema, order="sorted")).hexdigest()[:16]
    return _Spec(msgspec.json.encode(schema), digest, _Checker(schema), tuple(nullable))


class _FormMeta(msgspec.StructMeta):
    """Renders each Form subclass's schema once, when the class is created."""

    _form_spec: _Spec

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                **kwargs: Any) -> _FormMeta:
        kwargs.setdefault("kw_only", True)
        cls = super().__new__(mcls, name, bases, namespace, **kwargs)
        cls._form_spec = _render(typing.cast(type[msgspec.Struct], cls))
        return cls


@dataclass_transform(kw_only_default=True, field_specifiers=(msgspec.field,))
class Form(msgspec.Struct, metaclass=_FormMeta, kw_only=True):
    """Base of elicitation forms: typed fields become the restricted `requestedSchema`."""

    _form_spec: ClassVar[_Spec]

    @classmethod
    def requested_schema(cls) -> dict[str, object]:
        """A fresh copy of the rendered `requestedSchema`."""
        return typing.cast(dict[str, object], msgspec.json.decode(cls._form_spec.schema_json))

    @classmethod
    def schema_digest(cls) -> str:
        """A stable 16-hex-digit digest of the schema (detects a changed ask shape)."""
        return cls._form_spec.digest

    @classmethod
    def validate_answer(cls, content: Mapping[str, object]) -> Self:
        """Check `ElicitResult.content` and build the form. Raises FormInvalid."""
        spec = cls._form_spec
        values = spec.checker.check(content)
        for key in spec.nullable:
            values.setdefault(key, None)
        try:
            return msgspec.convert(values, cls)
        except msgspec.ValidationError as exc:  # defence in depth: the checker ran first
            raise FormInvalid({"content": str(exc)}) from None


class Confirmation(Form):
    """The one-checkbox form behind `ctx.confirm(message)`."""

    confirm: bool
