"""The fixture client for the official MCP conformance suite, written with `mrtr.client`.

The harness runs `python -m examples.conformance.client <server-url>` with
`MCP_CONFORMANCE_SCENARIO` set; each scenario is one small coroutine below. Every call is made
through the ordinary `Client`, so what passes here is what users get. Under
`MCP_CONFORMANCE_PROTOCOL_VERSION=2025-11-25` the client speaks the 2025 wire (`initialize`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from mrtr.client import Client, Handlers, HTTPTransport, Mode
from mrtr.client.auth import (
    ClientInfo,
    DPoP,
    HeadlessRedirect,
    OAuth,
    OAuthSettings,
    PrivateKeyJWT,
)
from mrtr.protocol import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    Root,
    TextContent,
)

log = logging.getLogger("conformance-client")


async def accept(params: ElicitRequestParams) -> ElicitResult:
    """Answer every form with its defaults or plausible values; consent to every URL."""
    if params.mode == "url":
        return ElicitResult(action="accept")
    schema = params.requested_schema if isinstance(params.requested_schema, dict) else {}
    content: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type")
        if "default" in prop:  # SEP-1034: every field present, defaults filled in
            content[name] = prop["default"]
        elif "enum" in prop:
            content[name] = prop["enum"][0]
        elif kind == "boolean":
            content[name] = True
        elif kind in ("integer", "number"):
            content[name] = prop.get("minimum", 1)
        else:
            content[name] = "conformance"
    return ElicitResult(action="accept", content=content)


async def sample(params: CreateMessageRequestParams) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(text="Paris"),
                               model="conformance-model", stop_reason="endTurn")


HANDLERS = Handlers(
    elicitation=accept,
    sampling=sample,
    roots=[Root(uri="file:///tmp/conformance", name="conformance")],
)


async def step(what: str, action: Callable[[], Awaitable[object]]) -> object:
    """Run one step; failures are logged, never fatal (the harness scores what it saw)."""
    try:
        return await action()
    except Exception as exc:  # noqa: BLE001 - a fixture reports and goes on
        log.warning("%s failed: %r", what, exc)
        return None


def _sample_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in schema.get("required", []):
        prop = schema.get("properties", {}).get(name, {})
        kind = prop.get("type")
        values[name] = 1 if kind in ("integer", "number") else True if kind == "boolean" else "x"
    return values


async def tools_call(client: Client) -> None:
    await step("list", client.list_tools)
    await step("call", lambda: client.call_tool("add_numbers", {"a": 5, "b": 3}))


async def list_only(client: Client) -> None:
    await step("list", client.list_tools)


async def elicitation_defaults(client: Client) -> None:
    await step("list", client.list_tools)
    await step("call", lambda: client.call_tool("test_client_elicitation_defaults", {}))


async def sse_retry(client: Client) -> None:
    await step("list", client.list_tools)
    await step("call", lambda: client.call_tool("test_reconnection", {}))


async def request_state(client: Client) -> None:
    await step("list", client.list_tools)
    for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state",
                 "test_mrtr_no_result_type"):
        await step(name, lambda name=name: client.call_tool(name, {}))  # type: ignore[misc]


async def custom_headers(client: Client) -> None:
    await step("list", client.list_tools)
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    for call in context.get("toolCalls", []):
        name, arguments = call.get("name"), call.get("arguments", {})
        await step(f"call {name}", lambda n=name, a=arguments: client.call_tool(n, a))  # type: ignore[misc]


async def schema_preservation(client: Client) -> None:
    tools = await step("list", client.list_tools)
    for tool in tools or []:  # type: ignore[attr-defined]
        if tool.name == "json_schema_2020_12_tool":
            await step("echo", lambda t=tool: client.call_tool(  # type: ignore[misc]
                "json_schema_echo", {"schema": t.input_schema}))


async def first_tool(client: Client) -> None:
    """What the auth scenarios score: an authorized list, then a call of the first tool."""
    tools = await step("list", client.list_tools) or []
    for tool in tools[:1]:  # type: ignore[index]
        await step(f"call {tool.name}", lambda t=tool: client.call_tool(t.name, {}))  # type: ignore[misc]


# The client ID metadata document URL the conformance auth scenarios expect.
CIMD_URL = "https://conformance-test.local/client-metadata.json"


def oauth_for(scenario: str) -> OAuth | None:
    """The OAuth client for an `auth/*` scenario; None for the others."""
    if not scenario.startswith("auth/"):
        return None
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    client_id, secret = context.get("client_id"), context.get("client_secret")
    if scenario.startswith("auth/client-credentials"):
        pem = context.get("private_key_pem")
        signer = PrivateKeyJWT(pem, algorithm=context.get("signing_algorithm", "ES256")) \
            if pem else None
        method = "private_key_jwt" if pem else "client_secret_basic"
        return OAuth(grant="client_credentials", assertion=signer,
                     client=ClientInfo(client_id=client_id, client_secret=secret,
                                       token_endpoint_auth_method=method))
    client = ClientInfo(client_id=client_id, client_secret=secret) if client_id else None
    dpop = DPoP(new_dpop_key()) if scenario.startswith("auth/dpop") else None
    return OAuth(redirect=HeadlessRedirect(), client=client, dpop=dpop,
                 settings=OAuthSettings(client_name="mrtr-conformance",
                                        client_metadata_url=CIMD_URL))


def new_dpop_key() -> str:
    """A fresh P-256 key (PEM) for the DPoP scenarios; mrtr.client takes keys, never makes them."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode("ascii")


async def everything(client: Client) -> None:
    """Exercise every method: discover, all lists, every tool, resource and prompt."""
    await step("discover", client.discover)
    tools = await step("list tools", client.list_tools) or []
    for tool in tools:  # type: ignore[attr-defined]
        arguments = _sample_arguments(tool.input_schema)
        await step(f"call {tool.name}", lambda t=tool, a=arguments: client.call_tool(t.name, a))  # type: ignore[misc]
    resources = await step("list resources", client.list_resources) or []
    for resource in resources:  # type: ignore[attr-defined]
        await step(f"read {resource.uri}", lambda r=resource: client.read_resource(r.uri))  # type: ignore[misc]
    prompts = await step("list prompts", client.list_prompts) or []
    for prompt in prompts:  # type: ignore[attr-defined]
        await step(f"get {prompt.name}", lambda p=prompt: client.get_prompt(p.name, {}))  # type: ignore[misc]


SCENARIOS: dict[str, Callable[[Client], Awaitable[None]]] = {
    "tools_call": tools_call,
    "sep-2322-client-request-state": request_state,
    "http-custom-headers": custom_headers,
    "json-schema-2020-12-preservation": schema_preservation,
    "initialize": list_only,
    "elicitation-sep1034-client-defaults": elicitation_defaults,
    "sse-retry": sse_retry,
}


async def run(url: str, scenario: str, version: str) -> None:
    # No era probe: some 2025 conformance mocks answer any method, server/discover too.
    mode: Mode = "legacy" if version.startswith("2025-") else "modern"
    auth = oauth_for(scenario)
    transport = HTTPTransport(url, auth=auth)
    default = first_tool if auth is not None else everything
    async with Client(transport, handlers=HANDLERS, timeout=30.0, mode=mode) as client:
        await SCENARIOS.get(scenario, default)(client)
    await transport.aclose()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
    if not args:
        print("usage: python -m examples.conformance.client <server-url>", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    asyncio.run(run(args[-1], scenario, os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
