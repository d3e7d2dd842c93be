"""Consent through the model (#29) with real clients that declare no elicitation (claude.ai).

The official `mcp` 1.x client (its own virtualenv, the fixture of test_mcp_interop) over real
HTTP (a 2025 session) and over stdio, and mrtr's own Client over real HTTP (2026-07-28): a
destructive tool answers with the question and a `_confirm` token; the call with the token
deletes once; a replay, other arguments, another principal, or no token → nothing runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from mrtr.client import Client
from mrtr.client.transports import HTTPTransport
from mrtr.http import McpApp
from mrtr.server import ConsentPolicy, Dispatcher
from tests.transports import consent_app
from tests.transports.conftest import ROOT, LiveServer, cli_env, free_port, run
from tests.transports.test_mcp_interop import mcp_python  # noqa: F401 - the shared fixture

TOKEN = re.compile(r'"_confirm": "([A-Za-z0-9._-]+)"')

CLIENT = r'''
import asyncio, json, re, sys
from mcp import ClientSession

TOKEN = re.compile(r'"_confirm": "([A-Za-z0-9._-]+)"')


def shown(result):
    return {"is_error": bool(result.isError), "text": result.content[0].text}


async def drive(session, other):
    init = await session.initialize()
    caps = init.capabilities
    out = {"version": init.protocolVersion}
    first = await session.call_tool("delete_repo", {"name": "mrtr"})
    out["first"] = shown(first)
    token = TOKEN.search(first.content[0].text).group(1)
    out["other_arguments"] = shown(await session.call_tool(
        "delete_repo", {"name": "prod", "_confirm": token}))
    if other is not None:
        await other.initialize()
        out["other_principal"] = shown(await other.call_tool(
            "delete_repo", {"name": "mrtr", "_confirm": token}))
    out["confirmed"] = shown(await session.call_tool(
        "delete_repo", {"name": "mrtr", "_confirm": token}))
    out["replayed"] = shown(await session.call_tool(
        "delete_repo", {"name": "mrtr", "_confirm": token}))
    print(json.dumps(out))


async def main(kind, target):
    if kind == "http":
        from mcp.client.streamable_http import streamablehttp_client
        async with streamablehttp_client(target, headers={"x-user": "ada"}) as (r, w, _), \
                streamablehttp_client(target, headers={"x-user": "mallory"}) as (r2, w2, _2):
            async with ClientSession(r, w) as session, ClientSession(r2, w2) as other:
                await drive(session, other)
    else:
        from mcp.client.stdio import StdioServerParameters, stdio_client
        command = json.loads(target)
        server = StdioServerParameters(command=command[0], args=command[1:],
                                       env=json.loads(sys.argv[3]), cwd=sys.argv[4])
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:  # no elicitation_callback
                await drive(session, None)


asyncio.run(main(sys.argv[1], sys.argv[2]))
'''


def official(python: Path, *args: str) -> tuple[dict[str, object], str]:
    script = Path(python).parent.parent / "consent_client.py"
    script.write_text(CLIENT)
    done = subprocess.run([str(python), str(script), *args], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome, done.stderr


async def who(headers: Mapping[str, str]) -> str | None:
    return headers.get("x-user")


@pytest.mark.slow
def test_official_client_without_elicitation_confirms_by_token_over_http(
    mcp_python: Path,  # noqa: F811 - the imported fixture
) -> None:
    port = free_port()
    app = McpApp(Dispatcher(consent_app.app), allowed_hosts=[f"127.0.0.1:{port}"],
                 authenticator=who)
    before = len(consent_app.deleted)
    with LiveServer(app, port) as server:
        outcome, _ = official(mcp_python, "http", f"{server.url}/mcp")
    assert outcome["version"] == "2025-11-25"  # a 2025 session
    assert_outcome(outcome, principals=True)
    assert consent_app.deleted[before:] == ["mrtr"]  # exactly once


@pytest.mark.slow
def test_official_client_without_elicitation_confirms_by_token_over_stdio(
    mcp_python: Path,  # noqa: F811 - the imported fixture
) -> None:
    command = [sys.executable, "-m", "mrtr.cli", "serve", "tests.transports.consent_app:app",
               "--stdio"]
    outcome, stderr = official(mcp_python, "stdio", json.dumps(command), json.dumps(cli_env()),
                               str(ROOT))
    assert_outcome(outcome, principals=False)
    assert stderr.count("DELETED ") == 1 and "DELETED mrtr" in stderr


def assert_outcome(outcome: Mapping[str, object], *, principals: bool) -> None:
    first = outcome["first"]
    assert isinstance(first, dict) and first["is_error"] is False
    assert "Delete the repository mrtr and all its issues?" in first["text"]
    assert TOKEN.search(first["text"]) is not None  # names the action and the token
    refused = ["other_arguments", "replayed"] + (["other_principal"] if principals else [])
    for name in refused:
        got = outcome[name]
        assert isinstance(got, dict) and got["is_error"] is True, (name, got)
        assert "Nothing was done" in got["text"]
    assert outcome["confirmed"] == {"is_error": False, "text": "Deleted mrtr."}


@pytest.mark.slow
def test_mrtr_client_without_elicitation_confirms_by_token_over_http() -> None:
    port = free_port()
    app = McpApp(Dispatcher(consent_app.app), allowed_hosts=[f"127.0.0.1:{port}"],
                 authenticator=who)
    before = len(consent_app.deleted)

    async def scenario() -> dict[str, object]:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(HTTPTransport(url, headers={"x-user": "ada"})) as ada, \
                Client(HTTPTransport(url, headers={"x-user": "mallory"})) as mallory:
            first = await ada.call_tool("delete_repo", {"name": "mrtr"})
            text = first.content[0].text  # type: ignore[union-attr]
            found = TOKEN.search(text)
            assert found is not None and "Delete the repository mrtr" in text
            assert consent_app.deleted[before:] == []  # without the token nothing ran
            token = found.group(1)
            stolen = await mallory.call_tool("delete_repo", {"name": "mrtr", "_confirm": token})
            other = await ada.call_tool("delete_repo", {"name": "prod", "_confirm": token})
            done = await ada.call_tool("delete_repo", {"name": "mrtr", "_confirm": token})
            replay = await ada.call_tool("delete_repo", {"name": "mrtr", "_confirm": token})
            return {"stolen": stolen.is_error, "other": other.is_error, "replay": replay.is_error,
                    "done": done.content[0].text}  # type: ignore[union-attr]

    with LiveServer(app, port):
        got = run(scenario())
    assert got == {"stolen": True, "other": True, "replay": True, "done": "Deleted mrtr."}
    assert consent_app.deleted[before:] == ["mrtr"]


NATIVE_CLIENT = r'''
import asyncio, json, sys
from mcp import ClientSession
from mcp.types import ElicitResult
from mcp.client.streamable_http import streamablehttp_client

asked = []


async def elicit(context, params):
    asked.append(params.message)
    return ElicitResult(action="accept", content={"confirm": True})


async def main(url):
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.initialize()
            result = await session.call_tool("delete_repo", {"name": "docs"})
            print(json.dumps({"asked": asked, "text": result.content[0].text}))


asyncio.run(main(sys.argv[1]))
'''


@pytest.mark.slow
@pytest.mark.parametrize("policy", [None, ConsentPolicy(ignore_elicitation=["mcp"])])
def test_official_client_with_elicitation_is_asked_natively_unless_the_operator_overrides(
    mcp_python: Path,  # noqa: F811 - the imported fixture
    policy: ConsentPolicy | None,
) -> None:
    port = free_port()
    app = McpApp(Dispatcher(consent_app.make(policy)), allowed_hosts=[f"127.0.0.1:{port}"])
    script = Path(mcp_python).parent.parent / "consent_native_client.py"
    script.write_text(NATIVE_CLIENT)
    before = len(consent_app.deleted)
    with LiveServer(app, port) as server:
        done = subprocess.run([str(mcp_python), str(script), f"{server.url}/mcp"],
                              capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    if policy is None:  # elicitation declared and trusted: a form, no token
        assert outcome["asked"] == ["Delete the repository docs and all its issues?"]
        assert outcome["text"] == "Deleted docs."
        assert consent_app.deleted[before:] == ["docs"]
    else:  # the official SDK's clientInfo.name is "mcp": the operator says it does not render
        assert outcome["asked"] == []
        assert TOKEN.search(outcome["text"]) is not None
        assert consent_app.deleted[before:] == []
