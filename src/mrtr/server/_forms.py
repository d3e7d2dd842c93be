"""Declarative elicitation forms rendered once to the restricted `requestedSchema` dialect.

Implements MCP 2026-07-28 client/elicitation form mode: flat primitive properties only.
"""

# Design: a Form subclass is analysed once, when the class is created (by the metaclass, because
# msgspec fills in fields and defaults only after `type.__new__` has run `__init_subclass__`).
# The rendered schema is kept once per class: the framework shares that dict with every ask it
# builds (never mutating it), `requested_schema()` hands users a fresh copy. An answer to a form
# without `format` fields is built by one msgspec.convert when valid; anything msgspec refuses
# goes through the jsonschema checker (`_schema_check`), which normalises it or explains what is
# wrong in one sentence per field. A property test keeps the two paths in agreement.
from __future__ import annotations

import datetime as dt
import enum
import hashlib
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self, dataclass_transform

import msgspec

from mrtr.server._schema_check import Checker, FormInvalid, validate_against_schema

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
_TEMPORAL = ("date", "date-time")
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


class _Spec:
    """A Form class's rendered schema; the jsonschema checker is built on first need."""

    __slots__ = ("_checker", "digest", "direct", "nullable", "schema", "schema_json")

    def __init__(self, schema: dict[str, object], nullable: tuple[str, ...]) -> None:
        self.schema = schema  # shared by every request built from the form: never mutate it
        self.schema_json = msgspec.json.encode(schema)
        self.digest = hashlib.sha256(msgspec.json.encode(schema, order="sorted")).hexdigest()[:16]
        self.nullable = nullable  # `X | None` without a default: absent means None
        # msgspec alone decides validity: no property carries a `format` msgspec does not check.
        self.direct = b'"format"' not in msgspec.json.encode(schema.get("properties"))
        self._checker: Checker | None = None

    @property
    def checker(self) -> Checker:
        if self._checker is None:
            self._checker = Checker(self.schema)
        return self._checker


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
    schema: dict[str, object] = {"type": "object", "properties": props, "required": required}
    return _Spec(schema, tuple(nullable))


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
        if spec.direct and isinstance(content, Mapping):
            # Fast path: a valid answer converts as it is. Anything msgspec refuses (including
            # 3.0 for an integer) goes through the checker, which explains or normalises it.
            present = {k: v for k, v in content.items() if v is not None}
            for key in spec.nullable:
                present.setdefault(key, None)
            try:
                return msgspec.convert(present, cls)
            except msgspec.ValidationError:
                pass
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
