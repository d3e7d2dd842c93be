"""Pydantic as an optional type system: tool and prompt parameters, and tool return types.

Used only for handlers whose types are pydantic's; everything else goes through msgspec.
"""

# Design: pydantic is never imported by mrtr itself. A user who writes pydantic types has
# imported pydantic already, so detection first asks `sys.modules` and then looks at the types
# (their pydantic hooks, the modules of their Annotated metadata) without importing anything;
# only a handler found to use pydantic imports it, once, at registration. Its parameters become
# one TypedDict validated by a TypeAdapter built then (the inputSchema is that adapter's schema,
# so schema and validator cannot disagree, as with msgspec's Struct); a return type gets its own
# adapter for `outputSchema` and for dumping results to JSON. Validation errors are rewritten in
# msgspec's shape ("… - at `$.n`") so both type systems read alike on the wire.
from __future__ import annotations

import dataclasses
import functools
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, NamedTuple, NotRequired, Required

import msgspec

__all__ = [
    "NO_DEFAULT",
    "Invalid",
    "Output",
    "Parameter",
    "arguments",
    "encode_model",
    "involves",
    "is_model",
    "mixes_msgspec",
    "output",
    "problems",
    "untitled",
]

_OWN_MODULES = ("pydantic", "pydantic_core", "annotated_types")  # Field, Ge, AfterValidator …
_HOOKS = ("__pydantic_validator__", "__get_pydantic_core_schema__")  # models, EmailStr …


class Invalid(ValueError):
    """Arguments pydantic refused; the message is in msgspec's shape, one problem per error."""


class Parameter(NamedTuple):
    name: str
    annotation: object  # with the framework's markers (Header, AskIfMissing) removed
    default: object  # the parameter's default (a plain value or a FieldInfo), or NO_DEFAULT
    asked: bool  # AskIfMissing: optional in the schema, absent from the result when omitted


NO_DEFAULT: Any = object()


def _own(obj: object) -> bool:
    return type(obj).__module__.partition(".")[0] in _OWN_MODULES


def involves(annotation: object, default: object = None) -> bool:
    """Whether a parameter's type or default is pydantic's (a model, a `Field`, a constraint).

    False without a look when pydantic was never imported, so servers without it pay nothing.
    """
    if sys.modules.get("pydantic") is None:
        return False
    return _own(default) or _mentions(annotation, set())


def is_model(tp: object) -> bool:
    """Whether `tp` is a pydantic model class (a BaseModel or a pydantic dataclass)."""
    return (sys.modules.get("pydantic") is not None and isinstance(tp, type)
            and hasattr(tp, "__pydantic_validator__"))


def encode_model(obj: object) -> object:
    """msgspec's `enc_hook` for pydantic models (returned without a return annotation saying
    so): their JSON. Raises TypeError for anything else, as msgspec would."""
    dump = getattr(obj, "model_dump", None)
    if dump is None or not is_model(type(obj)):
        raise TypeError(f"Encoding objects of type {type(obj).__name__} is unsupported")
    return dump(mode="json")


def _mentions(tp: object, seen: set[int]) -> bool:
    if id(tp) in seen:
        return False
    seen.add(id(tp))
    if isinstance(tp, type):
        if any(hasattr(tp, hook) for hook in _HOOKS):
            return True
        if dataclasses.is_dataclass(tp) or typing.is_typeddict(tp):
            try:
                hints = typing.get_type_hints(tp, include_extras=True)
            except (NameError, TypeError):
                return False
            return any(_mentions(hint, seen) for hint in hints.values())
        return False
    if typing.get_origin(tp) is Annotated:
        base, *extras = typing.get_args(tp)
        return any(_own(m) for m in extras) or _mentions(base, seen)
    return any(_mentions(arg, seen) for arg in typing.get_args(tp))


def mixes_msgspec(annotation: object) -> bool:
    """Whether `annotation` holds msgspec types (a Struct, Meta) that pydantic cannot read."""
    if isinstance(annotation, type):
        return issubclass(annotation, msgspec.Struct)
    if typing.get_origin(annotation) is Annotated:
        base, *extras = typing.get_args(annotation)
        return any(isinstance(m, msgspec.Meta) for m in extras) or mixes_msgspec(base)
    return any(mixes_msgspec(arg) for arg in typing.get_args(annotation))


@functools.cache
def untitled() -> type[Any]:
    """A schema generator leaving out the titles pydantic derives from field names."""
    from pydantic.json_schema import GenerateJsonSchema

    class Untitled(GenerateJsonSchema):
        def field_title_should_be_set(self, schema: Any) -> bool:
            return False

    return Untitled


def problems(exc: Exception) -> str:
    """A pydantic ValidationError in msgspec's words: `message - at `$.a.b``, `; `-joined."""
    parts = []
    for error in exc.errors(include_url=False, include_context=False):  # type: ignore[attr-defined]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
        parts.append(f"{error['msg']} - at `${where}`" if where else str(error["msg"]))
    return "; ".join(parts)


def arguments(
    owner: str, params: Sequence[Parameter]
) -> tuple[dict[str, object], Callable[[Mapping[str, object]], dict[str, object]]]:
    """The input schema of `params` and their validator, built from one TypedDict.

    The validator returns the converted arguments (defaults filled in, unknown keys dropped)
    and raises Invalid. Raises TypeError when pydantic cannot handle a parameter's type.
    """
    import pydantic
    from pydantic.fields import FieldInfo
    from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

    fields: dict[str, object] = {}
    for p in params:
        annotation = p.annotation
        if isinstance(p.default, FieldInfo):
            annotation = Annotated[annotation, p.default]  # its constraints and its default
        elif p.default is not NO_DEFAULT and not p.asked:
            annotation = Annotated[annotation, pydantic.Field(default=p.default)]
        optional = p.asked or p.default is not NO_DEFAULT
        if isinstance(p.default, FieldInfo) and p.default.is_required():
            optional = p.asked
        fields[p.name] = NotRequired[annotation] if optional else Required[annotation]
    shape = typing.cast(Any, TypedDict)(f"{owner}_arguments", fields, total=False)
    try:
        adapter = pydantic.TypeAdapter(shape)
        schema = adapter.json_schema(schema_generator=untitled())
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
        raise TypeError(str(exc).split("\n", 1)[0]) from None
    schema.pop("title", None)
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    validate = adapter.validate_python
    failure = pydantic.ValidationError

    def convert(values: Mapping[str, object]) -> dict[str, object]:
        try:
            return dict(validate(values))
        except failure as exc:
            raise Invalid(problems(exc)) from None

    return schema, convert


class Output(NamedTuple):
    """A pydantic return type: its `outputSchema` and the dump to (text, structuredContent)."""

    schema: dict[str, object]
    dump: Callable[[object], tuple[object, object]]


def output(tp: object) -> Output:
    """The outputSchema and dump of a pydantic return type.

    A type whose schema is not an object (`list[Model]`) is wrapped as `{"result": …}`, as
    FastMCP and the official SDK do; the text content stays the value itself.
    """
    import pydantic

    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(typing.cast(Any, tp))
        schema = adapter.json_schema(mode="serialization")
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
        raise TypeError(str(exc).split("\n", 1)[0]) from None
    if "$ref" in schema and "type" not in schema:  # a recursive model: inline the root
        name = str(schema.pop("$ref")).rsplit("/", 1)[1]
        schema = {**typing.cast(dict[str, Any], schema["$defs"])[name], **schema}
    dump_python = adapter.dump_python
    if schema.get("type") == "object":
        def dump(value: object) -> tuple[object, object]:
            data = dump_python(value, mode="json", warnings=False)
            return data, data

        return Output(schema, dump)
    defs = schema.pop("$defs", None)
    wrapped: dict[str, object] = {"type": "object", "properties": {"result": schema},
                                  "required": ["result"]}
    if defs is not None:
        wrapped["$defs"] = defs

    def dump_wrapped(value: object) -> tuple[object, object]:
        data = dump_python(value, mode="json", warnings=False)
        return data, {"result": data}

    return Output(wrapped, dump_wrapped)
