"""The fixture server for the official MCP conformance suite, written with the mrtr ask API.

Run: `python -m examples.conformance.server --port 3101` (serves http://127.0.0.1:3101/mcp).
What each tool must do is in the suite's fixture spec; names here are the ones the suite calls.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from typing import Annotated, Any

from examples.conformance.task_tools import add_task_tools
from mrtr import (
    Context,
    Form,
    Header,
    InputRequired,
    MissingRequiredClientCapability,
    Server,
    ToolError,
)
from mrtr.protocol import (
    AudioContent,
    ElicitRequest,
    ElicitRequestParams,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    TextContent,
    TextResourceContents,
)

app = Server("mrtr-conformance", version="1.0.0")

# A 1x1 transparent PNG and a tiny silent WAV: small, valid media for the content tests.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
WAV = base64.b64encode(
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00@\x1f\x00\x00@\x1f\x00\x00"
    b"\x01\x00\x08\x00data\x00\x00\x00\x00"
).decode()


# -- plain tools (the first one must be callable with {}) ----------------------------------------
@app.tool()
def test_simple_text() -> str:
    """Returns a simple text response."""
    return "This is a simple text response for testing."


@app.tool()
def test_image_content() -> ImageContent:
    """Returns an image."""
    return ImageContent(data=PNG, mime_type="image/png")


@app.tool()
def test_audio_content() -> AudioContent:
    """Returns audio."""
    return AudioContent(data=WAV, mime_type="audio/wav")


@app.tool()
def test_embedded_resource() -> EmbeddedResource:
    """Returns an embedded resource."""
    return EmbeddedResource(
        resource=TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain", text="Embedded text."
        )
    )


@app.tool()
def test_multiple_content_types() -> list[Any]:
    """Returns text, an image and a resource."""
    return [
        TextContent(text="Multiple content types test:"),
        ImageContent(data=PNG, mime_type="image/png"),
        EmbeddedResource(
            resource=TextResourceContents(
                uri="test://mixed-content-resource", mime_type="application/json",
                text='{"test": "data", "value": 123}',
            )
        ),
    ]


@app.tool()
def test_error_handling() -> str:
    """Always fails, as a tool result with isError."""
    raise ToolError("This tool intentionally returns an error for testing")


@app.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress three times, then answers."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"step {step}")
        await asyncio.sleep(0.05)
    return "Progress test completed."


@app.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability."""
    if not isinstance(ctx.client_capabilities.sampling, dict):
        raise MissingRequiredClientCapability({"sampling": {}})
    return "The client declared sampling."


@app.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Streams a log notification (never a request), then answers."""
    await ctx.log("info", "streaming before the result")
    return "Streaming completed without a server-initiated request."


@app.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs three messages when the request asked for logging."""
    for text in ("first", "second", "third"):
        await ctx.log("info", f"log message: {text}")
    return "Logging test completed."


@app.tool()
def test_x_mcp_header(region: Annotated[str, Header("Region")] = "unset") -> str:
    """Echoes the region it was routed with."""
    return f"Region: {region}"


@app.tool(
    input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": False,
    }
)
def json_schema_2020_12_tool(**arguments: Any) -> str:
    """Takes a JSON Schema 2020-12 input, passed through verbatim."""
    return json.dumps(arguments, sort_keys=True)


# -- MRTR tools ----------------------------------------------------------------------------------
class Name(Form):
    name: str


class Ok(Form):
    ok: bool


class Color(Form):
    color: str


class UserContext(Form):
    context: str


@app.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks the user's name; an answer sent up front counts (ignore-extra-params)."""
    answer = await ctx.elicit("What is your name?", Name, key="user_name", accept_unasked=True)
    return f"Hello, {answer.name}!"


@app.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question."""
    reply = await ctx.sample("What is the capital of France?", max_tokens=100,
                             key="capital_question")
    content = reply.content
    text = content.text if isinstance(content, TextContent) else "(non-text answer)"
    return f"The model said: {text}"


@app.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks the client's roots."""
    roots = await ctx.roots(key="client_roots")
    return "Roots: " + ", ".join(root.uri for root in roots)


@app.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Guard style: asks for confirmation and carries its own state value."""
    if ctx.state != "awaiting-confirm":
        ask = ElicitRequest(params=ElicitRequestParams(
            mode="form", message="Please confirm",
            requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}},
                              "required": ["ok"]},
        ))
        return InputRequired(asks={"confirm": ask}, state="awaiting-confirm")  # type: ignore[return-value]
    answer = ctx.input_responses.get("confirm")
    ok = isinstance(answer, dict) and answer.get("content", {}).get("ok") is True
    return f"state-ok: the sealed state came back; confirmed={ok}"


@app.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks a form, the model and the roots in one round."""
    name, greeting, roots = await ctx.gather(
        ctx.elicit("What is your name?", Name, key="user_name"),
        ctx.sample("Write a one-line greeting.", max_tokens=50, key="greeting"),
        ctx.roots(key="client_roots"),
    )
    text = greeting.content.text if isinstance(greeting.content, TextContent) else ""
    return f"{text} {name.name}; roots: {len(roots)}"


@app.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Asks for a name, then a favourite colour, in two rounds."""
    name = await ctx.elicit("What is your name?", Name, key="step1")
    color = await ctx.elicit(f"Hi {name.name}, what is your favourite colour?", Color,
                             key="step2")
    return f"{name.name} likes {color.color}."


@app.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Two rounds whose state must come back untouched."""
    first = await ctx.elicit("What is your name?", Name, key="user_name")
    return f"Hello, {first.name}; the state was intact."


@app.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Uses whichever input the client supports: a form if it can, else sampling."""
    if not isinstance(ctx.client_capabilities.elicitation, dict):
        reply = await ctx.sample("What is your name?", max_tokens=20, key="name_by_model")
        text = reply.content.text if isinstance(reply.content, TextContent) else "?"
        return f"Hello, {text}!"
    answer = await ctx.elicit("What is your name?", Name, key="user_name")
    return f"Hello, {answer.name}!"


# -- tools the 2025-11-25 requirement set calls (push-style asks in a session, MRTR otherwise) --
@app.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Logs three messages at info, ~50 ms apart."""
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.log("info", text)
        await asyncio.sleep(0.05)
    return "Logging tool completed."


@app.tool()
async def test_sampling(ctx: Context, prompt: str) -> str:
    """Asks the client's model to answer `prompt`."""
    reply = await ctx.sample(prompt, max_tokens=100, key="sampling")
    text = reply.content.text if isinstance(reply.content, TextContent) else "(non-text answer)"
    return f"LLM response: {text}"


@app.tool()
async def test_elicitation(ctx: Context, message: str) -> str:
    """Asks the user for a username and an email."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"username": {"type": "string"}, "email": {"type": "string"}},
        "required": ["username", "email"],
    }
    content = await ctx.elicit_schema(message, schema, key="user_info")
    return f"User response: action=accept, content={json.dumps(content, sort_keys=True)}"


@app.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """A form whose every field has a default (SEP-1034)."""
    schema: dict[str, Any] = {"type": "object", "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"],
                   "default": "active"},
        "verified": {"type": "boolean", "default": True},
    }}
    content = await ctx.elicit_schema("Please review your profile", schema, key="defaults")
    return f"Elicitation completed: {json.dumps(content, sort_keys=True)}"


def _titled(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in pairs]


@app.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """A form with the five enum shapes of SEP-1330."""
    options = ["option1", "option2", "option3"]
    schema: dict[str, Any] = {"type": "object", "properties": {
        "untitledSingle": {"type": "string", "enum": options},
        "titledSingle": {"type": "string", "oneOf": _titled(
            ("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option"))},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
        "titledMulti": {"type": "array", "items": {"anyOf": _titled(
            ("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third Choice"))}},
    }}
    content = await ctx.elicit_schema("Pick some options", schema, key="enums")
    return f"Elicitation completed: {json.dumps(content, sort_keys=True)}"


# -- prompts -------------------------------------------------------------------------------------
@app.prompt()
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@app.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@app.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Any]:  # noqa: N803 - wire name
    """A prompt that embeds a resource."""
    resource = TextResourceContents(uri=resourceUri, mime_type="text/plain",
                                    text="Embedded resource content for testing.")
    return [
        PromptMessage(role="user", content=EmbeddedResource(resource=resource)),
        "Please process the embedded resource above.",
    ]


@app.prompt()
def test_prompt_with_image() -> list[Any]:
    """A prompt with an image."""
    return [ImageContent(data=PNG, mime_type="image/png"), "Please analyze the image above."]


@app.prompt()
async def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that first asks the user for context."""
    answer = await ctx.elicit("What context should the prompt use?", UserContext,
                              key="user_context")
    return f"Use this context: {answer.context}"


@app.completion(prompt="test_prompt_with_arguments")
def complete_arg(argument: str, value: str, context: dict[str, str]) -> list[str]:
    options = ["testValue1", "testValue2", "test-other"]
    return [o for o in options if o.startswith(value)]


# -- resources -----------------------------------------------------------------------------------
@app.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@app.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource."""
    return base64.b64decode(PNG)


@app.resource("test://watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource clients subscribe to."""
    return "Watched resource content."


@app.resource("test://template/{id}/data", mime_type="application/json")
def template_data(id: str) -> dict[str, Any]:  # noqa: A002 - the template variable's name
    """A resource template."""
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


add_task_tools(app)  # last: tools/list keeps test_simple_text first


def main(argv: list[str] | None = None) -> int:
    from mrtr.cli import main as cli

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=3101)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    return cli(["serve", "examples.conformance.server:app", "--host", args.host,
                "--port", str(args.port)])


if __name__ == "__main__":
    raise SystemExit(main())
