"""What a tool returns: the outputSchema of its return annotation, and the check of its
structuredContent against that schema (compiled once, at registration)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import Annotated

import msgspec

from mrtr.server import _pydantic
from mrtr.server._schema import Dump, _hints, _inline, _name

__all__ = ["output_checker", "return_schema", "tool_output"]


def _is_object_type(tp: object) -> bool:
    if not isinstance(tp, type) or tp.__module__.startswith("mrtr."):
        return False  # framework types (CallToolResult, Ask, ...) are results, not output
    if issubclass(tp, msgspec.Struct):
        return not tp.__struct_config__.array_like
    return typing.is_typeddict(tp) or dataclasses.is_dataclass(tp)


def return_schema(fn: Callable[..., object]) -> dict[str, object] | None:
    """The outputSchema for a Struct / TypedDict / dataclass / pydantic return annotation."""
    return tool_output(fn)[0]


def tool_output(fn: Callable[..., object]) -> tuple[dict[str, object] | None, Dump | None]:
    """The outputSchema of `fn`'s return annotation, and the dump of a pydantic one.

    The dump turns a returned value into (JSON for the text, structuredContent); None means
    msgspec's `to_builtins`, or no structured output when the schema is None too.
    """
    tp = _hints(fn).get("return")
    if tp is not None and _pydantic.involves(tp):
        try:
            found = _pydantic.output(tp)
        except TypeError as exc:
            raise TypeError(f"{_name(fn)}: unsupported return type: {exc}") from None
        return found.schema, found.dump
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return (_inline(tp) if _is_object_type(tp) else None), None


def output_checker(schema: Mapping[str, object]) -> Callable[[object], str | None]:
    """A check of structuredContent against `schema` (JSON Schema 2020-12), compiled once.

    The check returns why the value does not match, or None when it does (TOOL-02).
    """
    import jsonschema  # type: ignore[import-untyped]  # only tools with an outputSchema pay

    validator = jsonschema.Draft202012Validator(schema)

    def check(value: object) -> str | None:
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "structuredContent"
        return f"{where}: {error.message}"

    return check
