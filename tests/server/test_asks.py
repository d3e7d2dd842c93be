"""Asks: capability matching, answer decoding and re-ask messages."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from mrtr.protocol import (
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    ListRootsRequest,
    SamplingMessage,
    TextContent,
    Tool,
)
from mrtr.server._asks import (
    Ask,
    Declined,
    Reask,
    Suspend,
    _typed,
    decode_elicit,
    form_spec,
    request_shape,
    resolve_roots,
    resolve_sample,
    roots_spec,
    sampling_spec,
    schema_digest,
    url_spec,
)
from mrtr.server._capabilities import capability_missing, required_capability

FORM: dict[str, object] = {"elicitation": {"form": {}}}
URL: dict[str, object] = {"elicitation": {"url": {}}}


@pytest.mark.parametrize(("declared", "needed", "missing"), [
    ({"elicitation": {}}, FORM, False),
    ({"elicitation": {"form": {}}}, FORM, False),
    ({"elicitation": {"url": {}}}, FORM, True),
    ({"elicitation": {}}, URL, True),
    ({"elicitation": {"form": {}, "url": {}}}, URL, False),
    ({}, FORM, True),
    ({"sampling": {}}, {"sampling": {}}, False),
    ({"sampling": {}}, {"sampling": {"tools": {}}}, True),
    ({"sampling": {"tools": {}}}, {"sampling": {"tools": {}}}, False),
    ({"roots": {"listChanged": True}}, {"roots": {}}, False),
    ({"sampling": {}}, {"roots": {}}, True),
    ({"elicitation": True}, FORM, True),
    (None, {"roots": {}}, True),
])
def test_capability_missing(declared: Any, needed: dict[str, object], missing: bool) -> None:
    assert capability_missing(declared, needed) is missing


def test_capability_missing_accepts_structs() -> None:
    assert not capability_missing(ClientCapabilities(roots={}), {"roots": {}})
    assert capability_missing(ClientCapabilities(), {"roots": {}})


def test_required_capability() -> None:
    form = ElicitRequest(params=ElicitRequestParams(message="m", requested_schema={}))
    url = ElicitRequest(params=ElicitRequestParams(mode="url", message="m", url="https://x"))
    msg = [SamplingMessage(role="user", content=TextContent(text="x"))]
    plain = CreateMessageRequest(params=CreateMessageRequestParams(messages=msg, max_tokens=1))
    tools = CreateMessageRequest(params=CreateMessageRequestParams(
        messages=msg, max_tokens=1, tools=[Tool(name="t", input_schema={"type": "object"})]))
    assert required_capability(form) == FORM
    assert required_capability(url) == URL
    assert required_capability(plain) == {"sampling": {}}
    assert required_capability(tools) == {"sampling": {"tools": {}}}
    assert required_capability(ListRootsRequest()) == {"roots": {}}


@pytest.mark.parametrize("raw", [12345, None, "x", [], {"action": "maybe"},
                                 {"action": "accept", "content": 3}])
def test_malformed_elicit_answers_reask(raw: object) -> None:
    with pytest.raises(Reask, match="malformed"):
        decode_elicit(raw)


def test_decoders() -> None:
    assert decode_elicit({"action": "decline"}).action == "decline"
    roots, kept = resolve_roots({"roots": [{"uri": "file:///a", "junk": "x" * 100}]})
    assert [r.uri for r in roots] == ["file:///a"] and kept == {"roots": [{"uri": "file:///a"}]}
    sample, kept = resolve_sample({"role": "assistant", "content": {"type": "text", "text": "t"},
                                   "model": "m", "junk": [1, 2, 3]})
    assert sample.model == "m" and "junk" not in kept and resolve_sample(kept)[0] == sample
    with pytest.raises(Reask):
        resolve_sample({"roots": []})
    with pytest.raises(Reask):
        resolve_roots({"roots": "nope"})


def _params(**changes: Any) -> CreateMessageRequestParams:
    base: dict[str, Any] = {
        "messages": [SamplingMessage(role="user", content=TextContent(text="hi"))],
        "max_tokens": 5}
    return CreateMessageRequestParams(**{**base, **changes})


def test_shape_covers_everything_the_user_or_model_sees() -> None:
    """Changing any part of an ask changes its shape (issue 11: consent bound to the question)."""
    schema: dict[str, object] = {"type": "object", "properties": {"x": {"type": "string"}}}
    other: dict[str, object] = {"type": "object", "properties": {"y": {"type": "string"}}}
    tool = Tool(name="t", input_schema={"type": "object"})
    shapes = [
        form_spec("Delete A?", schema, schema_digest(schema)).shape,
        form_spec("Delete B?", schema, schema_digest(schema)).shape,
        form_spec("Delete A?", other, schema_digest(other)).shape,
        url_spec("Sign in", "https://a.example").shape,
        url_spec("Sign in", "https://b.example").shape,
        url_spec("Log in", "https://a.example").shape,
        sampling_spec(_params()).shape,
        sampling_spec(_params(max_tokens=6)).shape,
        sampling_spec(_params(system_prompt="be terse")).shape,
        sampling_spec(_params(temperature=0.5)).shape,
        sampling_spec(_params(tools=[tool])).shape,
        sampling_spec(_params(messages=[SamplingMessage(role="user",
                                                        content=TextContent(text="ho"))])).shape,
        roots_spec().shape,
    ]
    assert len(set(shapes)) == len(shapes)
    assert schema_digest({"a": 1, "b": 2}) == schema_digest({"b": 2, "a": 1})
    assert form_spec("m", {}, "d").capability == FORM
    assert url_spec("m", "https://x").capability == URL
    assert sampling_spec(_params()).shape == sampling_spec(_params()).shape
    assert request_shape(url_spec("m", "https://x").request) != request_shape(
        url_spec("n", "https://x").request)


def test_shape_parts_cannot_run_into_each_other() -> None:
    assert url_spec("a", "bc").shape != url_spec("ab", "c").shape


def test_sampling_with_tools_needs_sampling_tools() -> None:
    tool = Tool(name="t", input_schema={"type": "object"})
    assert sampling_spec(_params()).capability == {"sampling": {}}
    assert sampling_spec(_params(tools=[tool])).capability == {"sampling": {"tools": {}}}


def test_suspend_is_not_an_exception() -> None:
    """A handler's `except Exception` must never swallow a suspension (issue 20, M15)."""
    assert issubclass(Suspend, BaseException) and not issubclass(Suspend, Exception)


def test_declined_message() -> None:
    assert str(Declined("decline", "Go?")) == "The user declined the request: Go?"
    assert Declined("cancel", "Go?").action == "cancel"


# -- issue 20: mutation survivors ---------------------------------------------------------------
def test_shapes_are_stable_across_releases() -> None:
    """Shapes are journaled in sealed states: a server upgraded mid-flow (rolling upgrade) must
    compute the same shape for the same ask, or every in-flight answer is asked again. These
    known answers pin the digest's parts (the kind tags, their order, the 128-bit length)."""
    schema: dict[str, object] = {"type": "object"}
    assert schema_digest(schema) == "a2c799262a3ce3c19ef5cdd983bf3d12"
    assert form_spec("Delete A?", schema, schema_digest(schema)).shape == (
        "6466800a1512369cc5272e9e7c219a68")
    assert url_spec("Sign in", "https://a.example").shape == "1b7989ea9738ba72533890fe1386afda"
    assert sampling_spec(_params()).shape == "bad8017e7bd87d9860ee3ba04412bbfa"
    assert roots_spec().shape == "0e945e83fe7972082c327ca7f2b0263a"
    assert request_shape(url_spec("Sign in", "https://a.example").request) == (
        "4a1213430d7695713ca0aea882cdab12")


def test_form_and_url_specs_build_the_wire_request() -> None:
    schema: dict[str, object] = {"type": "object", "properties": {"x": {"type": "string"}}}
    form = form_spec("Name?", schema, "d")
    assert msgspec.to_builtins(form.request) == {"method": "elicitation/create", "params": {
        "mode": "form", "message": "Name?", "requestedSchema": schema}}
    url = url_spec("Sign in", "https://a.example")
    assert msgspec.to_builtins(url.request) == {"method": "elicitation/create", "params": {
        "mode": "url", "message": "Sign in", "url": "https://a.example"}}
    assert msgspec.to_builtins(roots_spec().request) == {"method": "roots/list"}
    assert roots_spec().capability == {"roots": {}}
    assert form_spec("Name?", schema, "d").shape != form_spec("Name?", schema, "e").shape


@pytest.mark.parametrize(("declared", "needed"), [
    ({"elicitation": {}}, {"elicitation": {"form": {}}, "roots": {}}),
    ({"elicitation": {"form": {}}}, {"elicitation": {"form": {}}, "sampling": {}}),
    ({"sampling": {}}, {"sampling": {}, "roots": {}}),
])
def test_every_needed_capability_is_checked(declared: Any, needed: dict[str, object]) -> None:
    """A capability after a satisfied one is still checked (continue, not break)."""
    assert capability_missing(declared, needed) is True
    assert capability_missing({**declared, **{k: {} for k in needed if k != "elicitation"}},
                              needed) is False


def test_malformed_answers_say_so_exactly() -> None:
    for call in (lambda: decode_elicit(None), lambda: decode_elicit({"action": "maybe"}),
                 lambda: resolve_sample({"action": "accept"}),
                 lambda: resolve_roots({"roots": "nope"})):
        with pytest.raises(Reask) as info:
            call()
        assert info.value.problem == str(info.value) == "The previous answer was malformed."


def test_declined_names_the_action_and_keeps_the_prompt() -> None:
    declined = Declined("decline", "Go?")
    assert (declined.action, declined.prompt) == ("decline", "Go?")
    assert str(Declined("cancel", "Go?")) == "The user cancelled the request: Go?"
    assert str(Declined("other", "Go?")) == "The user other the request: Go?"


def test_with_problem_prefixes_elicitations_only() -> None:
    ctx_free = Ask(None, "k", form_spec("Name?", {}, "d"), decode_elicit)  # type: ignore[arg-type]
    request = ctx_free.with_problem("Too long.")
    assert msgspec.to_builtins(request) == {"method": "elicitation/create", "params": {
        "mode": "form", "message": "Too long.\n\nName?", "requestedSchema": {}}}
    sampling = Ask(None, "s", sampling_spec(_params()), resolve_sample)  # type: ignore[arg-type]
    assert sampling.with_problem("Too long.") is sampling.request


def test_an_answer_of_another_type_is_malformed() -> None:
    """The guard behind the three decoders: a decoded answer of the wrong type is refused."""
    with pytest.raises(Reask) as info:
        _typed("roots/list", {"roots": []}, ElicitResult)
    assert info.value.problem == "The previous answer was malformed."


def test_a_capability_the_struct_does_not_know_is_missing() -> None:
    """A capability name the ClientCapabilities Struct has no field for reads as missing."""
    assert capability_missing(ClientCapabilities(roots={}), {"tasks": {}}) is True
