"""Plausible values for `mrtr check`: tool arguments and answers built from requested schemas."""

# Design: the checker has no user, so it answers what a cooperative user would: defaults and the
# first allowed choice when given, otherwise a value of the declared type that meets the simple
# bounds. `--answers`/`--args` files override per key or tool. Nothing here is random, so two
# runs send the same requests.
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["answer", "arguments", "other_arguments"]

_FORMATS = {"email": "check@example.com", "uri": "https://example.com/",
            "date": "2026-07-28", "date-time": "2026-07-28T00:00:00Z"}


def value(schema: Mapping[str, Any]) -> Any:
    """One value that `schema` accepts, when it is simple enough to tell."""
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    for key in ("enum", "examples"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema[key][0]
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and isinstance(options[0], Mapping):
            return value(options[0])
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return _typed(str(kind), schema)


def _typed(kind: str, schema: Mapping[str, Any]) -> Any:
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        return int(low) + 1 if kind == "integer" else float(low) + 1
    if kind == "boolean":
        return True
    if kind == "array":
        items = schema.get("items")
        count = int(schema.get("minItems", 0))
        return [value(items) if isinstance(items, Mapping) else "x"] * count
    if kind == "object":
        return arguments(schema)
    text = _FORMATS.get(str(schema.get("format")), "mrtr-check")
    return text.ljust(int(schema.get("minLength", 0)), "x")


def arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for an object schema: its required properties, each with a plausible value."""
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required")
    names = required if isinstance(required, list) else []
    return {n: value(props[n]) if isinstance(props.get(n), Mapping) else "mrtr-check"
            for n in names if isinstance(n, str)}


def other_arguments(schema: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any] | None:
    """Arguments that differ from `args` in one value the schema still accepts, or None."""
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    for name, current in args.items():
        found = props.get(name)
        spec: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        changed = _changed(current, spec)
        if changed is not None:
            return {**args, name: changed}
    for name, spec in props.items():
        if name not in args and isinstance(spec, Mapping) and "const" not in spec:
            return {**args, name: value(spec)}
    return None


def _changed(current: Any, spec: Mapping[str, Any]) -> Any:
    choices = spec.get("enum")
    if isinstance(choices, list):
        return next((c for c in choices if c != current), None)
    if "const" in spec or isinstance(current, bool):
        return None if "const" in spec else not current
    if isinstance(current, int | float):
        return current + 1 if "maximum" not in spec or current + 1 <= spec["maximum"] else None
    if isinstance(current, str) and "format" not in spec and "pattern" not in spec:
        return current + "-other"
    return None


def answer(request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The answer to one input request, or None when the kind is unknown."""
    method = request.get("method")
    params = request.get("params")
    params = params if isinstance(params, Mapping) else {}
    if method == "elicitation/create":
        if params.get("mode") == "url":
            return {"action": "accept"}
        schema = params.get("requestedSchema")
        return {"action": "accept",
                "content": arguments(schema) if isinstance(schema, Mapping) else {}}
    if method == "sampling/createMessage":
        return {"role": "assistant", "model": "mrtr-check",
                "content": {"type": "text", "text": "mrtr check"}}
    if method == "roots/list":
        return {"roots": []}
    return None
