"""Checking elicitation answers against a `requestedSchema`, with one human sentence per field.

The slow, thorough path behind Form.validate_answer and the checker for raw schemas.
"""

# Design: jsonschema (Draft 2020-12) decides validity; its errors are translated into sentences
# a person can act on. jsonschema is imported on first use only: it costs ~10 MiB of RSS, and
# valid answers to forms without `format` fields never need it (Form.validate_answer).
from __future__ import annotations

import datetime as dt
import functools
import re
import types
import typing
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import msgspec

from mrtr.errors import MrtrError
from mrtr.protocol._formats import email_problem

__all__ = ["Checker", "FormInvalid", "default_problem", "validate_against_schema"]


class FormInvalid(MrtrError, ValueError):
    """An elicitation answer does not match the form; `message` is fit to show the user."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        self.message = "; ".join(f"{key}: {text}" for key, text in self.problems.items())
        super().__init__(self.message)


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


class FormatProblem(ValueError):
    """Why a value does not match its `format`, when there is more to say than the format."""


def format_ok(fmt: str, value: object) -> bool:
    """Whether a string `value` is a pragmatic match for `format` (non-strings pass).

    Raises FormatProblem with the reason for an email address that is not one.
    """
    if not isinstance(value, str):
        return True
    if fmt == "email":
        problem = email_problem(value)
        if problem is not None:
            raise FormatProblem(problem)
        return True
    try:
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


def _option_values(prop: object) -> list[object] | None:
    if not isinstance(prop, Mapping):
        return None
    titled = prop.get("oneOf") or prop.get("anyOf")
    if isinstance(titled, list):
        return [o.get("const") for o in titled if isinstance(o, Mapping)]
    enum = prop.get("enum")
    return list(enum) if isinstance(enum, list) else None


def default_problem(prop: Mapping[str, object]) -> str | None:
    """Why a property's own `default` breaks its options or bounds, or None when it fits.

    A default is an answer the author filled in: a client that sends it back gets it refused.
    Checked without jsonschema (forms are rendered at import).
    """
    if "default" not in prop:
        return None
    value = prop["default"]
    measure: float
    options = _option_values(prop)
    if options is not None and value not in options:
        return describe("enum", prop)
    if isinstance(value, list) and prop.get("type") == "array":
        items = _option_values(prop.get("items"))
        if items is not None and any(v not in items for v in value):
            return describe("items", prop)
        measure, low, high = len(value), "minItems", "maxItems"
    elif isinstance(value, str) and prop.get("format") not in _TEMPORAL:
        measure, low, high = len(value), "minLength", "maxLength"
    elif isinstance(value, int | float) and not isinstance(value, bool):
        measure, low, high = value, "minimum", "maximum"
    else:
        return None
    bound_low, bound_high = prop.get(low), prop.get(high)
    if isinstance(bound_low, int | float) and measure < bound_low:
        return describe(low, prop)
    if isinstance(bound_high, int | float) and measure > bound_high:
        return describe(high, prop)
    return None


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
        text = describe(keyword, props.get(key, {}))
        if keyword == "format" and isinstance(error.cause, FormatProblem):
            reason = str(error.cause).rstrip(".")
            text = f"{text} ({reason[:1].lower()}{reason[1:]})"
        return [(key, text)]
    return [(key, str(error.message))]


class Checker:
    """A compiled Draft 2020-12 validator for one `requestedSchema`, with human errors."""

    __slots__ = ("props", "validator")

    def __init__(self, schema: Mapping[str, object]) -> None:
        # Imported here: jsonschema costs ~10 MiB of RSS, and valid answers to plain forms never
        # need it (Form.validate_answer's fast path).
        import jsonschema  # type: ignore[import-untyped]

        formats = jsonschema.FormatChecker(formats=())
        for fmt in _FORMATS:
            formats.checks(fmt, raises=FormatProblem)(functools.partial(format_ok, fmt))
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
    return Checker(schema).check(content)
