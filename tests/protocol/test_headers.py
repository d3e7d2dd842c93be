"""Tests for mrtr.protocol._headers: the Streamable HTTP `Mcp-*` headers."""

from __future__ import annotations

import base64
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr.errors import HeaderMismatch
from mrtr.protocol._headers import (
    ToolHeaderError,
    check_headers,
    decode_header_value,
    derive_headers,
    encode_header_value,
    tool_header_map,
)

PV = "2026-07-28"
TOOL = "test_tool"


def asgi(raw: Mapping[str, str]) -> dict[str, str]:
    """Lower-case header names, as the ASGI adapter does."""
    return {k.lower(): v for k, v in raw.items()}


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


# --- http-header-validation (a conformance scenario) ----------------------------------------

LIST = ("tools/list", None)
CALL = ("tools/call", TOOL)
HEADER_VALIDATION = [
    pytest.param(LIST, {"Mcp-Method": "prompts/list"}, False, id="wrong-method"),
    pytest.param(LIST, {}, False, id="missing-method"),
    pytest.param(
        CALL, {"Mcp-Method": "tools/call", "Mcp-Name": "wrong_tool_name"}, False, id="wrong-name"
    ),
    pytest.param(
        CALL, {"Mcp-Method": "tools/call", "Mcp-Name": f"  {TOOL}  "}, True, id="name-with-ows"
    ),
    pytest.param(CALL, {"Mcp-Method": "tools/call"}, False, id="missing-name"),
    pytest.param(LIST, {"mcp-method": "tools/list"}, True, id="lowercase-header-name"),
    pytest.param(LIST, {"MCP-METHOD": "tools/list"}, True, id="uppercase-header-name"),
    pytest.param(LIST, {"Mcp-Method": "TOOLS/LIST"}, False, id="method-value-case"),
]


@pytest.mark.parametrize(("request_", "raw", "accept"), HEADER_VALIDATION)
def test_http_header_validation(
    request_: tuple[str, str | None], raw: dict[str, str], accept: bool
) -> None:
    method, name = request_
    headers = asgi({"MCP-Protocol-Version": PV, **raw})

    def check() -> None:
        check_headers(
            headers, protocol_version=PV, method=method, name=name, arguments={}, header_map={}
        )

    if accept:
        check()
        return
    with pytest.raises(HeaderMismatch) as info:
        check()
    assert info.value.code == -32020
    assert info.value.http_status == 400


# --- http-custom-header-server-validation (a conformance scenario) --------------------------

SUFFIX = "Custom-Value"
CUSTOM_MAP = {"value": SUFFIX}
CUSTOM_SERVER = [
    pytest.param("=?base64?SGVsbG8=?=", "Hello", True, id="base64"),
    pytest.param("=?base64?SGVsbG8?=", "Hello", False, id="bad-padding"),
    pytest.param("=?base64?SGVs!!!bG8=?=", "Hello", False, id="bad-characters"),
    pytest.param("SGVsbG8=", "SGVsbG8=", True, id="no-prefix-literal"),
    pytest.param("=?base64?SGVsbG8=", "=?base64?SGVsbG8=", True, id="no-suffix-literal"),
    pytest.param(None, "test-value", False, id="omitted"),
]


def call_headers(param: str | None, header: str = SUFFIX) -> dict[str, str]:
    raw = {"MCP-Protocol-Version": PV, "Mcp-Method": "tools/call", "Mcp-Name": TOOL}
    if param is not None:
        raw[f"Mcp-Param-{header}"] = param
    return asgi(raw)


def check_call(
    headers: dict[str, str],
    arguments: Mapping[str, object] | None,
    header_map: Mapping[str, str] = CUSTOM_MAP,
) -> None:
    check_headers(
        headers,
        protocol_version=PV,
        method="tools/call",
        name=TOOL,
        arguments=arguments,
        header_map=header_map,
    )


@pytest.mark.parametrize(("param", "body", "accept"), CUSTOM_SERVER)
def test_http_custom_header_server_validation(param: str | None, body: str, accept: bool) -> None:
    headers = call_headers(param)
    if accept:
        check_call(headers, {"value": body})
        return
    with pytest.raises(HeaderMismatch) as info:
        check_call(headers, {"value": body})
    assert (info.value.code, info.value.http_status) == (-32020, 400)


# --- further server checks --------------------------------------------------------------------


@pytest.mark.parametrize("version", [None, "2025-11-25", " 2026-07-28x"])
def test_protocol_version_missing_or_different(version: str | None) -> None:
    raw = {"Mcp-Method": "tools/list"}
    if version is not None:
        raw["MCP-Protocol-Version"] = version
    with pytest.raises(HeaderMismatch, match="MCP-Protocol-Version"):
        check_headers(
            asgi(raw),
            protocol_version=PV,
            method="tools/list",
            name=None,
            arguments=None,
            header_map={},
        )


@pytest.mark.parametrize(
    ("param", "body", "accept"),
    [
        ("42", 42, True),
        ("007", 7, True),
        ("-3", -3, True),
        ("7.0", 7, False),
        ("+7", 7, False),
        ("8", 7, False),
        (b64("42"), 42, True),
        ("true", True, True),
        ("false", False, True),
        ("True", True, False),
        ("1", True, False),
        ("", "", True),
        ("  padded  ", "padded", True),
        (b64("  padded  "), "  padded  ", True),
        ("Hello", "hello", False),
    ],
)
def test_param_canonical_comparison(param: str, body: object, accept: bool) -> None:
    headers = call_headers(param)
    if accept:
        check_call(headers, {"value": body})
    else:
        with pytest.raises(HeaderMismatch, match=f"Mcp-Param-{SUFFIX}"):
            check_call(headers, {"value": body})


@pytest.mark.parametrize("arguments", [{}, {"value": None}, None])
def test_param_header_without_argument_is_rejected(arguments: dict[str, object] | None) -> None:
    with pytest.raises(HeaderMismatch, match="present"):
        check_call(call_headers("x"), arguments)


@pytest.mark.parametrize("arguments", [{}, {"value": None}, None, {"value": 1.5}])
def test_absent_argument_needs_no_header(arguments: dict[str, object] | None) -> None:
    check_call(call_headers(None), arguments)


def test_param_header_name_is_case_insensitive() -> None:
    check_call(call_headers("x", header=SUFFIX.upper()), {"value": "x"})


def test_unmapped_param_headers_are_ignored() -> None:
    headers = {**call_headers("x"), "mcp-param-other": "y"}
    check_call(headers, {"value": "x"})


@pytest.mark.parametrize("bad", ["a\x00b", "a\nb", "a\rb", "a\x7fb", "caf\u00e9", "\x1b[31m"])
@pytest.mark.parametrize("header", ["mcp-method", "mcp-name", "mcp-param-custom-value"])
def test_control_and_non_ascii_characters_are_rejected(bad: str, header: str) -> None:
    headers = call_headers("x")
    headers[header] = bad
    with pytest.raises(HeaderMismatch):
        check_call(headers, {"value": "x"})


def test_mismatch_message_never_echoes_the_value() -> None:
    huge = "A" * 10_000
    with pytest.raises(HeaderMismatch) as info:
        check_call(call_headers(huge), {"value": "x"})
    assert huge[:50] not in info.value.message
    assert len(info.value.message) < 200


def test_name_may_be_base64() -> None:
    uri = "file:///tmp/caf\u00e9.txt"
    headers = asgi(
        {"MCP-Protocol-Version": PV, "Mcp-Method": "resources/read", "Mcp-Name": b64(uri)}
    )
    check_headers(
        headers,
        protocol_version=PV,
        method="resources/read",
        name=uri,
        arguments=None,
        header_map={},
    )


# --- decode_header_value ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("=?base64?SGVsbG8=?=", "Hello"),
        (" \t=?base64?SGVsbG8=?=\t ", "Hello"),
        ("=?base64??=", ""),
        ("SGVsbG8=", "SGVsbG8="),
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),
        ("base64?SGVsbG8=?=", "base64?SGVsbG8=?="),
        ("=?BASE64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?="),
        ("=?base64?=", "=?base64?="),  # prefix and suffix overlap: too short to be the form
        ("", ""),
    ],
)
def test_decode_header_value(raw: str, value: str) -> None:
    assert decode_header_value(raw) == value


@pytest.mark.parametrize(
    "raw",
    [
        "=?base64?SGVsbG8?=",  # missing padding
        "=?base64?SGVs!!!bG8=?=",  # outside the alphabet
        "=?base64?SGVsbG9=?=",  # non-canonical trailing bits
        "=?base64?SGVs bG8=?=",  # inner whitespace
        "=?base64?SGVsbG8==?=",  # excess padding
        "=?base64?/w==?=",  # not UTF-8
        "=?base64?SGVsbG8=?=\n",  # control character
    ],
)
def test_decode_header_value_rejects(raw: str) -> None:
    with pytest.raises(HeaderMismatch):
        decode_header_value(raw)


# --- encode_header_value / derive_headers (http-custom-headers, http-standard-headers) -------


@pytest.mark.parametrize(
    ("value", "header"),
    [
        ("us-west-2", "us-west-2"),
        ("hello world", "hello world"),
        ("", ""),
        ("caf\u00e9 \u65e5\u672c", b64("caf\u00e9 \u65e5\u672c")),
        (" leading", b64(" leading")),
        ("trailing ", b64("trailing ")),
        ("tab\there", b64("tab\there")),
        ("line\nfeed", b64("line\nfeed")),
        ("crlf\r\nline", b64("crlf\r\nline")),
        ("=?base64?abc?=", b64("=?base64?abc?=")),
        ("=?BASE64?abc", b64("=?BASE64?abc")),
        ("X-ray XL", "X-ray XL"),
        (42, "42"),
        (-7, "-7"),
        (0, "0"),
        (True, "true"),
        (False, "false"),
    ],
)
def test_encode_header_value(value: str | int | bool, header: str) -> None:
    assert encode_header_value(value) == header


CUSTOM_TOOL_MAP = {
    "region": "Region",
    "method": "Method",
    "count": "Count",
    "enabled": "Enabled",
    "unicode": "Unicode",
    "spaced": "Spaced",
    "tabbed": "Tabbed",
    "multiline": "Multiline",
    "crlf": "Crlf",
    "empty": "Empty",
    "verbose": "Verbose",
    "missing": "Missing",
}


def test_derive_headers_http_custom_headers() -> None:
    arguments: dict[str, object] = {
        "region": "us-west-2",
        "method": "POST",
        "count": 42,
        "enabled": True,
        "unicode": "\u65e5\u672c\u8a9e",
        "spaced": " padded ",
        "tabbed": "a\tb",
        "multiline": "a\nb",
        "crlf": "a\r\nb",
        "empty": "",
        "verbose": None,
        "float_val": 3.14,
        "query": "unannotated",
    }
    headers = derive_headers(
        protocol_version=PV,
        method="tools/call",
        name="test_custom_headers",
        arguments=arguments,
        header_map=CUSTOM_TOOL_MAP,
    )
    assert headers == {
        "MCP-Protocol-Version": PV,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "test_custom_headers",
        "Mcp-Param-Region": "us-west-2",
        "Mcp-Param-Method": "POST",
        "Mcp-Param-Count": "42",
        "Mcp-Param-Enabled": "true",
        "Mcp-Param-Unicode": b64("\u65e5\u672c\u8a9e"),
        "Mcp-Param-Spaced": b64(" padded "),
        "Mcp-Param-Tabbed": b64("a\tb"),
        "Mcp-Param-Multiline": b64("a\nb"),
        "Mcp-Param-Crlf": b64("a\r\nb"),
        "Mcp-Param-Empty": "",
    }
    check_headers(
        asgi(headers),
        protocol_version=PV,
        method="tools/call",
        name="test_custom_headers",
        arguments=arguments,
        header_map=CUSTOM_TOOL_MAP,
    )


def test_derive_headers_non_primitive_arguments_are_skipped() -> None:
    headers = derive_headers(
        protocol_version=PV,
        method="tools/call",
        name="t",
        arguments={"a": 1.5, "b": [1], "c": {"d": 1}},
        header_map={"a": "A", "b": "B", "c": "C"},
    )
    assert not [h for h in headers if h.startswith("Mcp-Param-")]


@pytest.mark.parametrize(
    ("method", "name"),
    [
        ("tools/list", None),
        ("tools/call", "my-hyphenated-tool"),
        ("resources/read", "file:///path/to/file%20name.txt"),
        ("resources/read", "https://example.com/resource?id=123"),
        ("prompts/get", "test_prompt"),
    ],
)
def test_derive_headers_http_standard_headers(method: str, name: str | None) -> None:
    headers = derive_headers(
        protocol_version=PV, method=method, name=name, arguments=None, header_map={}
    )
    expected = {"MCP-Protocol-Version": PV, "Mcp-Method": method}
    if name is not None:
        expected["Mcp-Name"] = name
    assert headers == expected


# --- tool_header_map (http-invalid-tool-headers) ----------------------------------------------


def schema(**properties: object) -> dict[str, object]:
    return {"type": "object", "properties": properties}


def prop(kind: object, header: object) -> dict[str, object]:
    return {"type": kind, "x-mcp-header": header}


INVALID_TOOLS = [
    pytest.param(schema(a=prop("string", "")), id="empty-name"),
    pytest.param(schema(a=prop("object", "A")), id="object"),
    pytest.param(schema(a=prop("array", "A")), id="array"),
    pytest.param(schema(a=prop("null", "A")), id="null"),
    pytest.param(schema(a=prop("number", "A")), id="number"),
    pytest.param(schema(a=prop("string", "Dup"), b=prop("string", "Dup")), id="duplicate"),
    pytest.param(schema(a=prop("string", "Dup"), b=prop("string", "DUP")), id="duplicate-case"),
    pytest.param(schema(a=prop("string", "My Header")), id="space"),
    pytest.param(schema(a=prop("string", "My:Header")), id="colon"),
    pytest.param(schema(a=prop("string", "R\u00e9gion")), id="non-ascii"),
    pytest.param(schema(a=prop("string", "Bad\x01")), id="control-char"),
    # Beyond the fixture's eleven:
    pytest.param(schema(a=prop(["number", "null"], "A")), id="number-or-null"),
    pytest.param(schema(a=prop(["string", "integer"], "A")), id="two-primitives"),
    pytest.param(schema(a={"x-mcp-header": "A"}), id="no-type"),
    pytest.param(schema(a=prop("string", 7)), id="non-string-name"),
    pytest.param(schema(a={**prop("integer", "A"), "maximum": 2**53}), id="unsafe-max"),
    pytest.param(schema(a={**prop("integer", "A"), "minimum": -(2**60)}), id="unsafe-min"),
    pytest.param(
        schema(a={"type": "object", "properties": {"b": prop("string", "B")}}), id="nested-property"
    ),
    pytest.param(
        {**schema(a={"$ref": "#/$defs/r"}), "$defs": {"r": prop("string", "R")}}, id="via-ref"
    ),
    pytest.param(
        {**schema(), "anyOf": [{"properties": {"a": prop("string", "A")}}]}, id="in-anyof"
    ),
    pytest.param({**schema(), "x-mcp-header": "Root"}, id="on-root"),
    pytest.param(schema(a={"type": "array", "items": prop("string", "A")}), id="in-items"),
    pytest.param({**schema(), "not": prop("string", "A")}, id="in-not"),
]


@pytest.mark.parametrize("input_schema", INVALID_TOOLS)
def test_invalid_tool_annotations(input_schema: dict[str, object]) -> None:
    with pytest.raises(ToolHeaderError):
        tool_header_map(input_schema)


def test_valid_tool_annotation() -> None:
    valid_tool = schema(region={"type": "string", "x-mcp-header": "Region"})
    assert tool_header_map(valid_tool) == {"region": "Region"}


def test_tool_header_map_accepts_primitives_and_ignores_data() -> None:
    input_schema = {
        "type": "object",
        "properties": {
            "s": prop(["string", "null"], "S"),
            "i": {**prop("integer", "I"), "minimum": 0, "maximum": 2**53 - 1},
            "b": prop("boolean", "B-2_x.y~"),
            "plain": {"type": "string", "default": {"x-mcp-header": "data, not schema"}},
            "x-mcp-header": {"type": "string"},
        },
        "required": ["s"],
    }
    assert tool_header_map(input_schema) == {"s": "S", "i": "I", "b": "B-2_x.y~"}
    assert tool_header_map({"type": "object"}) == {}


# --- properties -------------------------------------------------------------------------------


@given(st.text())
def test_decode_inverts_encode(value: str) -> None:
    assert decode_header_value(encode_header_value(value)) == value


@given(st.integers() | st.booleans())
def test_decode_inverts_encode_scalars(value: int | bool) -> None:
    assert decode_header_value(encode_header_value(value)) == encode_header_value(value)


ARG = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text()


@given(st.dictionaries(st.sampled_from("abcd"), ARG), st.text())
def test_check_accepts_what_derive_sends(arguments: dict[str, object], name: str) -> None:
    header_map = {"a": "A", "b": "Bee", "c": "C-c"}
    headers = derive_headers(
        protocol_version=PV,
        method="tools/call",
        name=name,
        arguments=arguments,
        header_map=header_map,
    )
    check_headers(
        asgi(headers),
        protocol_version=PV,
        method="tools/call",
        name=name,
        arguments=arguments,
        header_map=header_map,
    )


# --- pinned by mutation testing (make mutate) -------------------------------------------------


def test_tool_header_map_reads_past_plain_and_boolean_properties() -> None:
    input_schema = schema(first={"type": "string"}, anything=True, last=prop("string", "Last"))
    assert tool_header_map(input_schema) == {"last": "Last"}


@pytest.mark.parametrize(
    ("input_schema", "message"),
    [
        (schema(a=prop("string", "")), "empty header name on property 'a'"),
        (schema(a=prop("string", "A B")), "header name on property 'a' is not an HTTP token"),
        (schema(a=prop("number", "A")),
         "property 'a' must be of type string, integer or boolean"),
        (schema(a={**prop("integer", "A"), "maximum": 2**53}),
         "integer property 'a' has bounds outside the safe range"),
        (schema(a=prop("string", "Dup"), b=prop("string", "dup")),
         "duplicate header name 'dup' on property 'b'"),
        ({**schema(), "x-mcp-header": "Root"},
         "x-mcp-header is only allowed on top-level properties"),
        (schema(a={"type": "object", "properties": {"b": prop("string", "B")}}),
         "x-mcp-header is only allowed on top-level properties"),
    ],
)
def test_tool_header_errors_name_the_property(
    input_schema: dict[str, object], message: str
) -> None:
    with pytest.raises(ToolHeaderError) as info:
        tool_header_map(input_schema)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("a\x00b", "Header value contains invalid characters"),
        ("=?base64?SGVsbG8?=", "Header value has an invalid base64 encoding"),
    ],
)
def test_decode_header_value_messages(raw: str, message: str) -> None:
    with pytest.raises(HeaderMismatch) as info:
        decode_header_value(raw)
    assert info.value.message == message


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, "Mcp-Method header is missing"),
        ({"Mcp-Method": "tools/c\x00all"}, "Mcp-Method header has an invalid value"),
        ({"Mcp-Method": "tools/call"}, "Mcp-Name header is missing"),
        ({"Mcp-Method": "tools/call", "Mcp-Name": "other"},
         "Mcp-Name header does not match the request body"),
        ({"Mcp-Method": "tools/call", "Mcp-Name": TOOL},
         f"Mcp-Param-{SUFFIX} header is missing"),
    ],
)
def test_mismatch_messages_name_the_header(raw: dict[str, str], message: str) -> None:
    with pytest.raises(HeaderMismatch) as info:
        check_call(asgi({"MCP-Protocol-Version": PV, **raw}), {"value": "x"})
    assert info.value.message == message


def test_version_and_method_may_carry_ows_but_not_base64() -> None:
    padded = asgi({"MCP-Protocol-Version": f" {PV}\t", "Mcp-Method": "\ttools/call ",
                   "Mcp-Name": TOOL, f"Mcp-Param-{SUFFIX}": "x"})
    check_call(padded, {"value": "x"})
    for label, value in (("MCP-Protocol-Version", PV), ("Mcp-Method", "tools/call")):
        encoded = {**padded, label.lower(): b64(value)}
        with pytest.raises(HeaderMismatch, match=f"{label} header does not match"):
            check_call(encoded, {"value": "x"})


def test_integer_params_may_be_zero_padded_to_64_characters() -> None:
    check_call(call_headers("0" * 63 + "7"), {"value": 7})
    with pytest.raises(HeaderMismatch, match="does not match"):
        check_call(call_headers("0" * 64 + "7"), {"value": 7})
