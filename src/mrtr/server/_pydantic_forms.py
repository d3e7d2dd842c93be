"""Pydantic models as elicitation forms: the form subset of the model's own JSON Schema.

`render_form` hands pydantic models here (rendered once per model); AskIfMissing parameters of
pydantic handlers get their form property here too.
"""

# Design: pydantic writes the model's JSON Schema; this module keeps what the restricted
# `requestedSchema` dialect can carry (flat primitive fields, string enums and multi-selects,
# formats, lengths, bounds, defaults, titles, descriptions) and refuses, naming the field, what it
# cannot (nested models, objects, lists of anything but choices, unions). Keywords a form cannot
# show but pydantic checks anyway (`pattern`, exclusive float bounds, validators) are left out
# of the form: the answer is validated by pydantic and, when refused, asked again with pydantic's
# reason, as a Form's answer is. Exclusive integer bounds become inclusive ones (`gt=0` → 1).
from __future__ import annotations

import math
import typing
from collections.abc import Mapping
from typing import Any

from mrtr.server import _pydantic
from mrtr.server._forms import RenderedForm, humanise
from mrtr.server._schema_check import FormInvalid

__all__ = ["ModelForm", "form_property", "render_model"]

Property = dict[str, object]
_FORMATS = ("email", "uri", "date", "date-time")
_KEPT = ("title", "description", "minLength", "maxLength", "minimum", "maximum", "minItems",
         "maxItems")
_SUPPORTED = ("use str, int, float, bool, date, datetime, EmailStr, AnyUrl, a Literal or Enum of "
              "str, or a list/set of those")


def _resolve(prop: Mapping[str, object], defs: Mapping[str, Mapping[str, object]]
             ) -> dict[str, object]:
    """`prop` with a `$ref` replaced by its definition (the property's own keys win)."""
    ref = prop.get("$ref")
    if not isinstance(ref, str):
        return dict(prop)
    name = ref.rsplit("/", 1)[1]
    target = dict(defs.get(name, {}))
    target.pop("title", None)  # the class name: the field's title comes from the field
    if target.get("type") == "object":
        target["x-class"] = name  # for the error naming what the field is
    return {**target, **{k: v for k, v in prop.items() if k != "$ref"}}


def _nullable(prop: dict[str, object]) -> tuple[dict[str, object], bool]:
    """`X | None` → (X, True); other unions raise TypeError."""
    branches = prop.get("anyOf")
    if not isinstance(branches, list):
        return prop, False
    members = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
    if len(members) != 1 or not isinstance(members[0], dict):
        raise TypeError(f"a union cannot be a form field: {_SUPPORTED}")
    rest = {k: v for k, v in prop.items() if k != "anyOf"}
    return {**members[0], **rest}, len(members) < len(branches)


def _choices(prop: Mapping[str, object]) -> list[object] | None:
    if "const" in prop:
        return [prop["const"]]
    enum = prop.get("enum")
    return list(enum) if isinstance(enum, list) else None


def _what(prop: Mapping[str, object], *, plural: bool = False) -> str:
    """`a nested model (Address)` / `Address models`, `an object` / `objects`, …"""
    kind = prop.get("type")
    if "x-class" in prop:
        return f"{prop['x-class']} models" if plural else f"a nested model ({prop['x-class']})"
    if kind == "object":
        return "objects" if plural else "an object"
    if isinstance(kind, str):
        return f"{kind}s" if plural else f"a {kind} value"
    return "values of this type" if plural else "this type"


def form_property(name: str, prop: Mapping[str, object],
                  defs: Mapping[str, Mapping[str, object]]) -> Property:
    """The restricted-dialect property for one field of a pydantic JSON Schema.

    Raises TypeError saying what the field is when a form cannot carry it.
    """
    source = _resolve(_nullable(_resolve(prop, defs))[0], defs)  # `Enum | None`: a $ref inside
    out: Property = {"type": "", "title": humanise(name)}
    out.update({k: source[k] for k in _KEPT if k in source})
    if (options := _choices(source)) is not None:
        if not options or not all(isinstance(v, str) for v in options):
            raise TypeError(f"enum options must be strings, not {options}")
        out.update(type="string", enum=options)
    elif source.get("type") == "array":
        items = _resolve(typing.cast(Mapping[str, object], source.get("items") or {}), defs)
        options = _choices(items)
        if options is None or not all(isinstance(v, str) for v in options):
            raise TypeError(f"a form cannot carry a list of {_what(items, plural=True)}: a "
                            "list is a multi-select, of a Literal or Enum of str")
        out.update(type="array", items={"type": "string", "enum": options})
    elif source.get("type") in ("string", "integer", "number", "boolean"):
        out["type"] = source["type"]
        if source.get("format") in _FORMATS:
            out["format"] = source["format"]
        if source["type"] == "integer":
            _inclusive(out, source)
    else:
        raise TypeError(f"a form cannot carry {_what(source)}: {_SUPPORTED}")
    default = prop.get("default", source.get("default"))
    if default is not None:
        out["default"] = default
    return out


def _inclusive(out: Property, source: Mapping[str, object]) -> None:
    """Exclusive integer bounds as inclusive ones: `gt=0` is `minimum: 1`."""
    low, high = source.get("exclusiveMinimum"), source.get("exclusiveMaximum")
    if isinstance(low, int | float):
        bottom = math.floor(low) + 1  # the smallest integer above `low`
        out["minimum"] = max(bottom, typing.cast(int, out.get("minimum", bottom)))
    if isinstance(high, int | float):
        top = math.ceil(high) - 1  # the largest integer below `high`
        out["maximum"] = min(top, typing.cast(int, out.get("maximum", top)))


class ModelForm(RenderedForm[Any]):
    """A pydantic model's rendered form; answers are checked by the form, then by pydantic."""

    __slots__ = ("_dump", "_validate")

    def __init__(self, model: type[Any], schema: dict[str, object],
                 nullable: tuple[str, ...]) -> None:
        super().__init__(model, schema, nullable)
        import pydantic

        adapter = pydantic.TypeAdapter(model)
        self._validate = adapter.validate_python
        self._dump = adapter.dump_python
        self.direct = False  # never msgspec: every answer goes through the checker and pydantic

    def validate(self, content: Mapping[str, object]) -> Any:
        """Check `ElicitResult.content` and build the model. Raises FormInvalid."""
        values = self.checker.check(content)
        for key in self.nullable:
            values.setdefault(key, None)
        try:
            return self._validate(values)
        except ValueError as exc:  # pydantic's ValidationError: one sentence per field
            raise FormInvalid(_form_problems(exc)) from None

    def content(self, value: object) -> object:
        return self._dump(value, mode="json", by_alias=True)


def _form_problems(exc: ValueError) -> dict[str, str]:
    found: dict[str, str] = {}
    errors = getattr(exc, "errors", None)
    if errors is None:
        return {"content": str(exc)}
    for error in errors(include_url=False, include_context=False):
        loc = error["loc"]
        text = str(error["msg"]).removeprefix("Value error, ")
        found.setdefault(str(loc[0]) if loc else "content", text[:1].lower() + text[1:])
    return found


def render_model(model: type[Any]) -> ModelForm:
    """The form of a pydantic model (a BaseModel or a pydantic dataclass).

    Raises TypeError naming the first field a form cannot carry.
    """
    import pydantic

    try:
        schema = pydantic.TypeAdapter(model).json_schema(schema_generator=_pydantic.untitled())
    except pydantic.PydanticUserError as exc:
        raise TypeError(f"{model.__qualname__}: {str(exc).splitlines()[0]}") from None
    defs = typing.cast(Mapping[str, Mapping[str, object]], schema.get("$defs") or {})
    props: dict[str, object] = {}
    schema.setdefault("properties", {})
    for name, prop in typing.cast(dict[str, Mapping[str, object]], schema["properties"]).items():
        try:
            props[name] = form_property(name, prop, defs)
        except TypeError as exc:
            raise TypeError(f"{model.__qualname__}.{name}: {exc}") from None
    required: list[str] = []
    nullable: list[str] = []
    for name in typing.cast(list[str], schema.get("required") or []):
        raw = typing.cast(Mapping[str, object], schema["properties"][name])
        (nullable if _nullable(_resolve(raw, defs))[1] else required).append(name)
    form: dict[str, object] = {"type": "object", "properties": props, "required": required}
    return ModelForm(model, form, tuple(nullable))
