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
# Dataclasses, TypedDicts and plain Structs are forms too: we cannot hook their creation, so
# `render_form` renders one on first use (a bounded memo keyed by the type) with the same code;
# msgspec.convert builds all four kinds. A Form's spec is one isinstance check away.
from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import hashlib
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, NamedTuple, Self, TypeVar, dataclass_transform

import msgspec

from mrtr.server import _pydantic
from mrtr.server._schema_check import (
    Checker,
    FormInvalid,
    default_problem,
    validate_against_schema,
)

__all__ = [
    "Choices",
    "Confirmation",
    "Email",
    "Form",
    "FormInvalid",
    "RenderedForm",
    "StringFormat",
    "Uri",
    "render_form",
    "validate_against_schema",
]

Property = dict[str, object]
T = TypeVar("T")


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
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            extras.extend(annotation.__metadata__)  # type: ignore[attr-defined]
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Required, typing.NotRequired):  # TypedDict keys
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
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
        if (problem := default_problem(prop)) is not None:
            raise TypeError(f"the default {prop['default']!r} does not fit its own field "
                            f"({problem}): change the default or the bound")
    return prop


class RenderedForm(Generic[T]):
    """A form type's rendered schema and the converter that builds answers into that type.

    The jsonschema checker is built on first need.
    """

    __slots__ = ("_checker", "digest", "direct", "nullable", "schema", "schema_json", "target")

    def __init__(
        self, target: type[T], schema: dict[str, object], nullable: tuple[str, ...]
    ) -> None:
        self.target = target  # what answers become: the Form, dataclass, TypedDict or Struct
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

    def validate(self, content: Mapping[str, object]) -> T:
        """Check `ElicitResult.content` and build the target type. Raises FormInvalid."""
        if self.direct and isinstance(content, Mapping):
            # Fast path: a valid answer converts as it is. Anything msgspec refuses (including
            # 3.0 for an integer) goes through the checker, which explains or normalises it.
            present = {k: v for k, v in content.items() if v is not None}
            for key in self.nullable:
                present.setdefault(key, None)
            try:
                return msgspec.convert(present, self.target)
            except msgspec.ValidationError:
                pass
        values = self.checker.check(content)
        for key in self.nullable:
            values.setdefault(key, None)
        try:
            return msgspec.convert(values, self.target)
        except msgspec.ValidationError as exc:  # defence in depth: the checker ran first
            raise FormInvalid({"content": str(exc)}) from None

    def content(self, value: object) -> object:
        """A validated answer as the JSON journaled for later rounds (validated again then)."""
        return msgspec.to_builtins(value)


class _Field(NamedTuple):
    name: str
    encode_name: str
    annotation: object
    default: object  # msgspec.NODEFAULT when none
    required: bool


def _struct_fields(cls: type[msgspec.Struct]) -> list[_Field]:
    fields = []
    for info in msgspec.structs.fields(cls):
        default = info.default
        if info.default_factory is not msgspec.NODEFAULT:
            default = info.default_factory()
        fields.append(_Field(info.name, info.encode_name, info.type, default, info.required))
    return fields


def _dataclass_fields(cls: type) -> list[_Field]:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = []
    for info in dataclasses.fields(cls):
        if not info.init:
            continue
        default: object = info.default
        if info.default_factory is not dataclasses.MISSING:
            default = info.default_factory()
        if default is dataclasses.MISSING:
            default = msgspec.NODEFAULT
        required = default is msgspec.NODEFAULT
        fields.append(_Field(info.name, info.name, hints[info.name], default, required))
    return fields


def _typeddict_fields(cls: type) -> list[_Field]:
    hints = typing.get_type_hints(cls, include_extras=True)
    # `__required_keys__` misses NotRequired[...] written as a string (postponed annotations)
    # on Python 3.11; the resolved hint says it, as msgspec reads it.
    required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    marked = {typing.Required: True, typing.NotRequired: False}
    return [_Field(name, name, hint, msgspec.NODEFAULT,
                   marked.get(typing.get_origin(hint), name in required_keys))
            for name, hint in hints.items()]


def _render(cls: type[T], fields_of: Callable[[Any], list[_Field]]) -> RenderedForm[T]:
    try:
        fields = fields_of(cls)
    except NameError as exc:
        raise TypeError(f"{cls.__qualname__}: cannot resolve an annotation ({exc}); define the "
                        "form and the types it uses at module level") from None
    props: dict[str, object] = {}
    required: list[str] = []
    nullable: list[str] = []
    for field in fields:
        try:
            props[field.encode_name] = field_property(field.name, field.annotation, field.default)
        except TypeError as exc:
            raise TypeError(f"{cls.__qualname__}.{field.name}: {exc}") from None
        if field.required:
            (nullable if unwrap(field.annotation)[2] else required).append(field.encode_name)
    schema: dict[str, object] = {"type": "object", "properties": props, "required": required}
    return RenderedForm(cls, schema, tuple(nullable))


_NOT_A_FORM = ("ctx.elicit() needs a form type: a mrtr.Form subclass, a dataclass, a TypedDict, "
               "a msgspec.Struct or a pydantic model, not {}")


def render_form(form: type[T]) -> RenderedForm[T]:
    """The rendered schema of a form type: a `Form`, a dataclass, a TypedDict or a Struct.

    Rendered once per type. Raises TypeError for anything else, naming `mrtr.Form`, or when
    a field has no form in the restricted elicitation schema.
    """
    if isinstance(form, _FormMeta):
        return form._form_spec
    if not isinstance(form, type):
        raise TypeError(_NOT_A_FORM.format(f"{form!r} (a {type(form).__name__}, not a type)"))
    plain: type = form  # mypy sees type[T] as unhashable
    return _render_other(plain)


@functools.lru_cache(maxsize=256)  # a pure memo: the same few form types come back every round
def _render_other(form: type) -> RenderedForm[Any]:
    if _pydantic.is_model(form):
        from mrtr.server._pydantic_forms import render_model  # it builds on this module

        return render_model(form)
    if issubclass(form, msgspec.Struct):
        if form.__struct_config__.array_like:
            raise TypeError(f"{form.__qualname__}: an array_like Struct cannot be a form")
        return _render(form, _struct_fields)
    if dataclasses.is_dataclass(form):
        return _render(form, _dataclass_fields)
    if typing.is_typeddict(form):
        return _render(form, _typeddict_fields)
    raise TypeError(_NOT_A_FORM.format(f"{form.__qualname__}"))


class _FormMeta(msgspec.StructMeta):
    """Renders each Form subclass's schema once, when the class is created."""

    _form_spec: RenderedForm[Any]

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                **kwargs: Any) -> _FormMeta:
        kwargs.setdefault("kw_only", True)
        cls = super().__new__(mcls, name, bases, namespace, **kwargs)
        cls._form_spec = _render(cls, _struct_fields)
        return cls


@dataclass_transform(kw_only_default=True, field_specifiers=(msgspec.field,))
class Form(msgspec.Struct, metaclass=_FormMeta, kw_only=True):
    """Base of elicitation forms: typed fields become the restricted `requestedSchema`."""

    _form_spec: ClassVar[RenderedForm[Any]]

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
        form: Self = cls._form_spec.validate(content)  # no typing.cast call: a hot path
        return form


class Confirmation(Form):
    """The one-checkbox form behind `ctx.confirm(message)`."""

    confirm: bool
