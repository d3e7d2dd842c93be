"""docs/auth.md as a reader meets it: the API-key and gateway snippets run as written (#15)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from mrtr.http import McpApp
from mrtr.server import Dispatcher
from tests.auth.conftest import secure_app, send
from tests.transports.conftest import call, post_args, run

AUTH_MD = Path(__file__).resolve().parents[2] / "docs" / "auth.md"


def section_code(heading: str) -> str:
    """Every ```python block of one `## heading` section, joined."""
    section = AUTH_MD.read_text().split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return "\n".join(re.findall(r"^```python\n(.*?)^```$", section, re.MULTILINE | re.DOTALL))


def snippets() -> dict[str, Any]:
    app, _ = secure_app()
    ns: dict[str, Any] = {"__name__": "auth_docs", "app": app}
    exec(compile(section_code("## API keys and gateways"), str(AUTH_MD), "exec"), ns)
    return ns


def text_of(response: Any) -> str:
    return str(response.json()["result"]["content"][0]["text"])


def test_15_api_key_verifier_snippet() -> None:
    keyed: McpApp = snippets()["keyed"]
    assert text_of(send(keyed, call("whoami"), "k-ann-123")) == (
        "api-key ann None notes:read notes:write")
    assert text_of(send(keyed, call("write"), "k-ann-123")) == "written"
    refused = send(keyed, call("whoami"), "k-bob-000")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == (
        'Bearer error="invalid_token", resource_metadata='
        '"https://notes.example.com/.well-known/oauth-protected-resource/mcp"')


def test_15_gateway_authenticator_snippet() -> None:
    gated: McpApp = snippets()["gated"]
    assert send(gated, call("whoami")).status_code == 401

    async def go() -> Any:
        args = post_args(call("write"))
        args["headers"].update({"x-authenticated-user": "ann",
                                "x-authenticated-scopes": "notes:read"})
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gated),
                                     base_url="http://127.0.0.1:8000") as client:
            denied = await client.post("/mcp", **args)
            args["headers"]["x-authenticated-scopes"] = "notes:write"
            return denied, await client.post("/mcp", **args)
    denied, allowed = run(go())
    assert denied.status_code == 403 and text_of(allowed) == "written"


def test_15_plain_dispatcher_without_auth_does_not_check_scopes() -> None:
    app, runs = secure_app()
    assert text_of(send(McpApp(Dispatcher(app)), call("write"))) == "written"
    assert runs
