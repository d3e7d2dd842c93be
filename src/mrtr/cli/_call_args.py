"""The command line of `mrtr call` and friends: the target, `key=value` arguments, --sampler."""

# Design: every mistake here is a usage error (ValueError, exit 2) found before anything is
# started or sent: a first argument that is not a URL, a URL and --stdio together, a malformed
# URL, a --sampler command that does not exist, an argument given twice, an extra positional.
# Values follow the tool's input schema when there is one: a demanding user who types
# `code=0123` or `team=null` for a text parameter means that text, not a number or null.
from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Mapping, Sequence

import httpx

__all__ = ["check_sampler", "check_url", "is_url", "no_more", "parse_arguments"]

_KINDS: dict[type, str] = {str: "string", bool: "boolean", int: "integer", float: "number",
                           list: "array", dict: "object", type(None): "null"}


def is_url(text: str) -> bool:
    """True when `text` is meant as an HTTP URL (it has an http:// or https:// scheme)."""
    return text.lower().startswith(("http://", "https://"))


def check_url(text: str) -> str:
    """`text` if it is a usable server URL; raises ValueError saying what is wrong."""
    if not is_url(text):
        raise ValueError(f"the first argument must be the server URL (http://HOST:PORT/PATH), "
                         f"or use --stdio 'CMD'; got {text!r}")
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise ValueError(f"invalid URL {text!r}: {exc}") from None
    if not url.host:
        raise ValueError(f"invalid URL {text!r}: no host")
    return text


def check_sampler(command: str | None) -> None:
    """Raise ValueError unless the --sampler command can be run."""
    if command is None:
        return
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"--sampler {command!r}: {exc}") from None
    if not argv or shutil.which(argv[0]) is None:
        raise ValueError(f"--sampler: command not found: {argv[0] if argv else command!r}")


def no_more(rest: Sequence[str], usage: str) -> None:
    """Raise ValueError naming the first extra positional, if any."""
    if rest:
        raise ValueError(f"unexpected argument {rest[0]!r} (usage: {usage})")


def parse_arguments(
    pairs: Sequence[str], *, as_json: bool = True, schema: Mapping[str, object] | None = None
) -> dict[str, object]:
    """`key=value` pairs to arguments.

    With `as_json`, a value is JSON when it parses, except that for a parameter of `schema`
    that accepts strings, JSON of a type the parameter does not accept stays text.
    Raises ValueError for an item without `=` or a key given twice.
    """
    arguments: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        if key in arguments:
            raise ValueError(f"{key!r} is given twice")
        arguments[key] = _value(value, _accepted(schema, key)) if as_json else value
    return arguments


def _value(text: str, accepted: set[str]) -> object:
    try:
        parsed: object = json.loads(text)
    except ValueError:
        return text
    kind = _KINDS.get(type(parsed), "")
    if not accepted or kind in accepted or (kind == "integer" and "number" in accepted):
        return parsed
    return text if "string" in accepted else parsed


def _accepted(schema: Mapping[str, object] | None, key: str) -> set[str]:
    """The JSON types the parameter `key` accepts ({} when unknown: anything goes)."""
    props = schema.get("properties") if schema is not None else None
    prop = props.get(key) if isinstance(props, dict) else None
    if not isinstance(prop, dict):
        return set()
    options = [prop, *(o for k in ("anyOf", "oneOf") for o in _list(prop.get(k)))]
    kinds: set[str] = set()
    for option in options:
        if not isinstance(option, dict):
            continue
        declared = option.get("type")
        kinds.update([declared] if isinstance(declared, str) else
                     [t for t in _list(declared) if isinstance(t, str)])
        values = [*_list(option.get("enum")), *([option["const"]] if "const" in option else [])]
        kinds.update(_KINDS.get(type(v), "") for v in values)
    return kinds - {""}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []
