"""The Streamable HTTP `Mcp-*` headers: value encoding, `x-mcp-header` maps, derive and check.

Pure functions over plain values; the transports call them (spec: transports/streamable-http).
"""

# Design: header values are compared after decoding, never as raw bytes, so a client may encode a
# value we would have sent plain. Integers compare numerically ("007" matches 7) because the spec
# says so; booleans and strings compare exactly (values are case-sensitive). A raw header value may
# hold only SP, HTAB and visible ASCII: anything else is the spec's "bad characters" (-32020), and
# error messages name the header but never echo its value.
from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Mapping

from mrtr.errors import HeaderMismatch, MrtrError

__all__ = [
    "ToolHeaderError",
    "check_headers",
    "decode_header_value",
    "derive_headers",
    "encode_header_value",
    "tool_header_map",
]

ANNOTATION = "x-mcp-header"
_PREFIX = "=?base64?"
_SUFFIX = "?="
_OWS = " \t"
_PLAIN = re.compile(r"[\x20-\x7e]*")
_RAW_OK = re.compile(r"[\t\x20-\x7e]*")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_DECIMAL = re.compile(r"-?[0-9]+")
_PRIMITIVES = frozenset({"string", "integer", "boolean"})
_SAFE_INT = 2**53 - 1
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# Keywords whose value maps names to subschemas, and keywords whose value is instance data.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions",
                          "dependentSchemas"})
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})


class ToolHeaderError(MrtrError, ValueError):
    """A tool's `x-mcp-header` annotation is invalid; clients drop such tools over HTTP."""


def encode_header_value(value: str | int | bool) -> str:
    """Return the header form of `value`: plain when safe, else `=?base64?<b64 of UTF-8>?=`.

    Booleans give `true`/`false`, integers decimal. Raises UnicodeEncodeError (a ValueError) for
    strings holding lone surrogates.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if _is_plain(value):
        return value
    return _PREFIX + base64.b64encode(value.encode("utf-8")).decode("ascii") + _SUFFIX


def _is_plain(value: str) -> bool:
    if value == "":
        return True
    if not _PLAIN.fullmatch(value) or value != value.strip(" "):
        return False
    # Anything that starts like the sentinel goes encoded, whatever its case or suffix.
    return not value.lower().startswith(_PREFIX)


def decode_header_value(raw: str) -> str:
    """Return the value carried by a raw header value, after trimming OWS (SP, HTAB).

    Only the exact form `=?base64?X?=` is decoded, strictly (alphabet, padding, canonical bits,
    UTF-8); anything else is a literal. Raises HeaderMismatch for bad characters or a bad encoding.
    """
    if not _RAW_OK.fullmatch(raw):
        raise HeaderMismatch("Header value contains invalid characters")
    value = raw.strip(_OWS)
    if not (value.startswith(_PREFIX) and value.endswith(_SUFFIX)
            and len(value) >= len(_PREFIX) + len(_SUFFIX)):
        return value
    text = value[len(_PREFIX):-len(_SUFFIX)]
    try:
        data = base64.b64decode(text, validate=True)
        if base64.b64encode(data).decode("ascii") != text:
            raise ValueError("non-canonical base64")
        return data.decode("utf-8")
    except (binascii.Error, ValueError):
        raise HeaderMismatch("Header value has an invalid base64 encoding") from None


def tool_header_map(input_schema: Mapping[str, object]) -> dict[str, str]:
    """Return {argument name: header Name} for the `x-mcp-header` annotations of a tool.

    Raises ToolHeaderError when an annotation is invalid: an empty or non-token name, a duplicate
    name (ignoring case), a property type other than string/integer/boolean (optionally with
    "null"), integer bounds outside the safe range, or an annotation outside top-level `properties`.
    """
    found: dict[str, str] = {}
    seen: set[str] = set()
    properties = input_schema.get("properties")
    props = properties if isinstance(properties, Mapping) else {}
    if ANNOTATION in input_schema:
        raise ToolHeaderError(f"{ANNOTATION} is only allowed on top-level properties")
    _reject_stray(input_schema, "properties")
    for arg, schema in props.items():
        if not isinstance(schema, Mapping):
            continue
        _reject_stray(schema, ANNOTATION)
        if ANNOTATION not in schema:
            continue
        name = _check_annotation(str(arg), schema)
        if name.lower() in seen:
            raise ToolHeaderError(f"duplicate header name {name!r} on property {arg!r}")
        seen.add(name.lower())
        found[str(arg)] = name
    return found


def _reject_stray(schema: Mapping[str, object], skip: str) -> None:
    """Raise ToolHeaderError if a subschema of `schema` (bar keyword `skip`) is annotated."""
    stack = _subschemas(schema, skip)
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, Mapping):
            if ANNOTATION in node:
                raise ToolHeaderError(f"{ANNOTATION} is only allowed on top-level properties")
            stack.extend(_subschemas(node, None))


def _subschemas(schema: Mapping[str, object], skip: str | None) -> list[object]:
    """The keyword values of `schema` that may hold subschemas (instance data is left out)."""
    found: list[object] = []
    for key, value in schema.items():
        if key == skip or key in _DATA_KEYWORDS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            found.extend(value.values())
        else:
            found.append(value)
    return found


def _check_annotation(arg: str, schema: Mapping[str, object]) -> str:
    name = schema[ANNOTATION]
    if not isinstance(name, str) or name == "":
        raise ToolHeaderError(f"empty header name on property {arg!r}")
    if not _TOKEN.fullmatch(name):
        raise ToolHeaderError(f"header name on property {arg!r} is not an HTTP token")
    kind = _primitive_type(schema.get("type"))
    if kind is None:
        raise ToolHeaderError(f"property {arg!r} must be of type string, integer or boolean")
    if kind == "integer" and not _safe_bounds(schema):
        raise ToolHeaderError(f"integer property {arg!r} has bounds outside the safe range")
    return name


def _primitive_type(declared: object) -> str | None:
    """The one primitive type named by a `type` keyword (a string or a list), else None."""
    kinds = [declared] if isinstance(declared, str) else declared
    if not isinstance(kinds, list):
        return None
    rest = {k for k in kinds if k != "null"}
    if len(rest) != 1:
        return None
    (kind,) = rest
    return kind if isinstance(kind, str) and kind in _PRIMITIVES else None


def _safe_bounds(schema: Mapping[str, object]) -> bool:
    for key in _BOUNDS:
        bound = schema.get(key)
        if isinstance(bound, int | float) and not isinstance(bound, bool):
            if abs(bound) > _SAFE_INT:
                return False
    return True


def _canonical(value: object) -> str | None:
    """The header form of an argument, or None when it is not mirrored (null, float, object)."""
    if isinstance(value, bool | int | str):
        return encode_header_value(value)
    return None


def derive_headers(
    *,
    protocol_version: str,
    method: str,
    name: str | None,
    arguments: Mapping[str, object] | None,
    header_map: Mapping[str, str],
) -> dict[str, str]:
    """Return the `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` headers.

    `name` is `params.name` or `params.uri`; `header_map` comes from `tool_header_map`. Null,
    absent and non-primitive arguments are omitted.
    """
    headers = {"MCP-Protocol-Version": protocol_version, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = encode_header_value(name)
    args = arguments or {}
    for arg, header in header_map.items():
        value = _canonical(args.get(arg))
        if value is not None:
            headers[f"Mcp-Param-{header}"] = value
    return headers


def check_headers(
    headers: Mapping[str, str],
    *,
    protocol_version: str,
    method: str,
    name: str | None,
    arguments: Mapping[str, object] | None,
    header_map: Mapping[str, str],
) -> None:
    """Check that the request headers mirror the body; `headers` must have lower-case names.

    Raises HeaderMismatch (-32020, HTTP 400) naming the first missing, undecodable or mismatched
    header. Integers compare numerically, strings and booleans exactly. An unsupported but matching
    version is not this function's concern.
    """
    # The usual request carries each value verbatim: settled here without calling _expect.
    raw = headers.get("mcp-protocol-version")
    if raw != protocol_version or not _verbatim(raw):
        _expect(headers, "MCP-Protocol-Version", protocol_version, decode=False)
    raw = headers.get("mcp-method")
    if raw != method or not _verbatim(raw):
        _expect(headers, "Mcp-Method", method, decode=False)
    if name is not None:
        raw = headers.get("mcp-name")
        if raw != name or not _verbatim(raw):
            _expect(headers, "Mcp-Name", name, decode=True)
    args = arguments or {}
    for arg, header in header_map.items():
        _check_param(headers, f"Mcp-Param-{header}", args.get(arg))


def _read(headers: Mapping[str, str], label: str, *, decode: bool) -> str | None:
    raw = headers.get(label.lower())
    if raw is None:
        return None
    try:
        if decode:
            return decode_header_value(raw)
        if not _RAW_OK.fullmatch(raw):
            raise HeaderMismatch()
        return raw.strip(_OWS)
    except HeaderMismatch:
        raise HeaderMismatch(f"{label} header has an invalid value") from None


def _expect(headers: Mapping[str, str], label: str, expected: str, *, decode: bool) -> None:
    """The header is not the body's value verbatim (check_headers settles that case inline):
    read it as the spec says, decoding it if `decode`, and compare."""
    got = _read(headers, label, decode=decode)
    if got is None:
        raise HeaderMismatch(f"{label} header is missing")
    if got != expected:
        raise HeaderMismatch(f"{label} header does not match the request body")


@functools.lru_cache(maxsize=256)  # versions, methods and tool names recur: a pure memo
def _verbatim(raw: str) -> bool:
    """True when `raw` reads as itself both raw and decoded (printable ASCII, no OWS at the
    ends, not the base64 form), so equality with the expected value settles the check."""
    return (raw.isascii() and raw.isprintable() and raw[:1] != " " and raw[-1:] != " "
            and not raw.startswith(_PREFIX))


def _check_param(headers: Mapping[str, str], label: str, value: object) -> None:
    got = _read(headers, label, decode=True)
    if value is None or _canonical(value) is None:
        if got is not None:
            raise HeaderMismatch(f"{label} header is present but the argument is not")
        return
    if got is None:
        raise HeaderMismatch(f"{label} header is missing")
    if not _param_matches(got, value):
        raise HeaderMismatch(f"{label} header does not match the request body")


def _param_matches(got: str, value: object) -> bool:
    if isinstance(value, bool):
        return got == ("true" if value else "false")
    if isinstance(value, int):
        # Bounded so int() stays cheap; safe integers have at most 16 digits.
        return len(got) <= 64 and _DECIMAL.fullmatch(got) is not None and int(got) == value
    return got == value
