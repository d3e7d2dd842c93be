"""ResourceServer end to end: McpApp in-process, tokens and keys from a real local AS (#15)."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from mrtr.auth import ResourceServer
from mrtr.http import McpApp
from mrtr.server import Dispatcher
from tests.auth.authserver import AuthServer
from tests.auth.conftest import RESOURCE, guarded, secure_app, send, settings, tool
from tests.transports.conftest import call, request

METADATA = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"


def challenge_of(response: Any) -> str:
    value: str = response.headers["www-authenticate"]
    return value


# -- metadata (RFC 9728) ---------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp",
                                  "/.well-known/oauth-protected-resource"])
def test_15_metadata_document_shape(auth: AuthServer, path: str) -> None:
    response = send(guarded(auth, scopes=("mcp",)), {}, method="GET", path=path)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "resource": RESOURCE, "authorization_servers": [auth.issuer],
        "scopes_supported": ["mcp", "notes:write"], "bearer_methods_supported": ["header"]}


def test_15_metadata_names_the_configured_resource(auth: AuthServer) -> None:
    app = guarded(auth, resource="https://mcp.example.com/api/mcp")
    path = "/.well-known/oauth-protected-resource/api/mcp"
    assert send(app, {}, method="GET", path=path).json()["resource"] == (
        "https://mcp.example.com/api/mcp")
    behind_proxy = send(app, {}, method="GET", path="/.well-known/oauth-protected-resource/mcp")
    assert behind_proxy.json()["resource"] == "https://mcp.example.com/api/mcp"
    missing = send(app, {}, method="GET", path="/.well-known/oauth-protected-resource/other")
    assert missing.status_code == 404


def test_15_no_metadata_without_auth() -> None:
    app = McpApp(Dispatcher(secure_app()[0]))
    assert send(app, {}, method="GET", path="/.well-known/oauth-protected-resource").status_code \
        == 404


# -- 401 -------------------------------------------------------------------------------------

def test_15_missing_token_is_401_with_resource_metadata_and_scope(auth: AuthServer) -> None:
    response = tool(guarded(auth, scopes=("mcp",)), "whoami", None)
    assert response.status_code == 401
    assert challenge_of(response) == f'Bearer scope="mcp", resource_metadata="{METADATA}"'
    assert response.json()["error"]["code"] == -32600


def _bad_tokens(auth: AuthServer) -> dict[str, str]:
    stranger = ec.generate_private_key(ec.SECP256R1())
    now = time.time()
    return {
        "expired": auth.mint(aud=RESOURCE, expires_in=-120),
        "forged": auth.mint(aud=RESOURCE, key=stranger),  # a published kid, another key
        "unknown kid": auth.mint(aud=RESOURCE, key=stranger, kid="nope"),
        "wrong audience": auth.mint(aud="http://127.0.0.1:8000/other"),
        "wrong issuer": auth.mint(aud=RESOURCE, iss="http://127.0.0.1:1/evil"),
        "not yet valid": auth.mint(aud=RESOURCE, nbf=int(now + 600)),
        "alg none": jwt.encode({"iss": auth.issuer, "sub": "x", "aud": RESOURCE,
                                "exp": int(now + 60)}, None, algorithm="none"),  # type: ignore[arg-type]
        "hmac": jwt.encode({"iss": auth.issuer, "sub": "x", "aud": RESOURCE,
                            "exp": int(now + 60)}, "k" * 32, algorithm="HS256",
                           headers={"kid": auth.keys[0][0]}),
        "garbage": "not.a.jwt",
        "opaque without introspection": "opaque-token",
        "no subject": auth.mint(aud=RESOURCE, sub=""),
    }


def test_15_bad_tokens_are_401_invalid_token_never_5xx(auth: AuthServer) -> None:
    app = guarded(auth)
    for name, token in _bad_tokens(auth).items():
        response = tool(app, "whoami", token)
        assert response.status_code == 401, name
        assert challenge_of(response) == (
            f'Bearer error="invalid_token", resource_metadata="{METADATA}"'), name
        assert "Traceback" not in response.text and "kid" not in response.text, name


def test_15_good_token_gives_the_principal_to_the_handler(auth: AuthServer) -> None:
    token = auth.mint(aud=RESOURCE, sub="alice", client_id="app-1", scope="mcp notes:read")
    response = tool(guarded(auth, scopes=("mcp",)), "whoami", token)
    assert response.status_code == 200
    assert response.json()["result"]["content"][0]["text"] == (
        f"{auth.issuer} alice app-1 mcp notes:read")


def test_15_audience_is_checked_by_default_and_configurable(auth: AuthServer) -> None:
    for_api = auth.mint(aud="api://notes")
    assert tool(guarded(auth), "whoami", for_api).status_code == 401
    app = guarded(auth, audience=("api://notes",))
    assert tool(app, "whoami", for_api).status_code == 200
    assert tool(app, "whoami", auth.mint(aud=RESOURCE)).status_code == 401


def test_15_a_list_audience_naming_the_resource_passes(auth: AuthServer) -> None:
    token = auth.mint(aud=["api://other", RESOURCE])
    assert tool(guarded(auth), "whoami", token).status_code == 200


def test_15_small_clock_skew_is_tolerated(auth: AuthServer) -> None:
    token = auth.mint(aud=RESOURCE, expires_in=-5)  # expired 5 s ago: within the 30 s leeway
    assert tool(guarded(auth), "whoami", token).status_code == 200
    assert tool(guarded(auth, leeway=0.0), "whoami", token).status_code == 401


# -- 403 -------------------------------------------------------------------------------------

def test_15_token_without_a_required_scope_is_403(auth: AuthServer) -> None:
    response = tool(guarded(auth, scopes=("mcp",)), "whoami", auth.mint(aud=RESOURCE,
                                                                        scope="other"))
    assert response.status_code == 403
    assert challenge_of(response) == (
        f'Bearer error="insufficient_scope", scope="mcp other", resource_metadata="{METADATA}"')


def test_15_tool_scope_missing_is_403_naming_it_and_the_handler_never_runs(
        auth: AuthServer) -> None:
    server, runs = secure_app()
    app = guarded(auth, server, scopes=("mcp",))
    response = tool(app, "write", auth.mint(aud=RESOURCE, scope="mcp"))
    assert response.status_code == 403
    assert challenge_of(response) == (f'Bearer error="insufficient_scope", '
                                      f'scope="mcp notes:write", resource_metadata="{METADATA}"')
    assert runs == []
    stepped = auth.mint(aud=RESOURCE, scope="mcp notes:write")
    assert tool(app, "write", stepped).json()["result"]["content"][0]["text"] == "written"
    assert len(runs) == 1


def test_15_tool_scopes_bind_over_2025_sessions_too(auth: AuthServer) -> None:
    server, runs = secure_app()
    app = guarded(auth, server)
    token = auth.mint(aud=RESOURCE)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "old", "version": "0"}}}
    import httpx

    from tests.transports.conftest import run

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1:8000") as c:
            head = {"authorization": f"Bearer {token}", "content-type": "application/json",
                    "accept": "application/json, text/event-stream",
                    "mcp-protocol-version": "2025-06-18"}
            opened = await c.post("/mcp", json=init, headers=head)
            head["mcp-session-id"] = opened.headers["mcp-session-id"]
            return await c.post("/mcp", headers=head, json={
                "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "write", "arguments": {}}})
    response = run(go())
    text = response.text
    assert "-32600" in text and "notes:write" in text and runs == []


def _session_call(app: McpApp, token: str, name: str) -> Any:
    """Open a 2025-06-18 session with `token`, then call tool `name` in it."""
    import httpx

    from tests.transports.conftest import run

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "old", "version": "0"}}}

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1:8000") as c:
            head = {"authorization": f"Bearer {token}", "content-type": "application/json",
                    "accept": "application/json, text/event-stream",
                    "mcp-protocol-version": "2025-06-18"}
            opened = await c.post("/mcp", json=init, headers=head)
            head["mcp-session-id"] = opened.headers["mcp-session-id"]
            return await c.post("/mcp", headers=head, json={
                "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": name, "arguments": {}}})
    return run(go())


def test_24_a_tool_scope_refusal_is_one_answer_in_both_eras(auth: AuthServer) -> None:
    """Issue 24: a 2025 session used to get 200 + an SSE error event without the challenge.

    The MCP authorization spec's scope challenge is 403 with `WWW-Authenticate:
    error="insufficient_scope"`, for any protocol revision: both eras now get it, with the
    request's id and the tool's `requiredScopes` in the body, before the handler runs.
    """
    server, runs = secure_app()
    app = guarded(auth, server, scopes=("mcp",))
    token = auth.mint(aud=RESOURCE, scope="mcp")
    modern = send(app, call("write", id=2), token)
    legacy = _session_call(app, token, "write")
    expected_challenge = (f'Bearer error="insufficient_scope", scope="mcp notes:write", '
                          f'resource_metadata="{METADATA}"')
    expected_body = {"jsonrpc": "2.0", "id": 2, "error": {
        "code": -32600, "message": "Forbidden: insufficient scope",
        "data": {"requiredScopes": ["notes:write"]}}}
    for response in (modern, legacy):
        assert response.status_code == 403
        assert response.headers["content-type"] == "application/json"
        assert challenge_of(response) == expected_challenge
        assert response.json() == expected_body
    assert runs == []
    stepped = auth.mint(aud=RESOURCE, scope="mcp notes:write")
    assert "written" in _session_call(app, stepped, "write").text  # SSE, as before
    assert len(runs) == 1


# -- requestState is bound to the principal ----------------------------------------------------

def test_15_state_replayed_with_another_subjects_token_is_32602_and_never_runs(
        auth: AuthServer) -> None:
    server, runs = secure_app()
    app = guarded(auth, server)
    alice = auth.mint(aud=RESOURCE, sub="alice", scope="a")
    first = tool(app, "greet", alice).json()["result"]
    assert first["resultType"] == "input_required" and len(runs) == 1
    retry = {"inputResponses": {"name": {"action": "accept", "content": {"name": "Eve"}}},
             "requestState": first["requestState"]}
    for other in (auth.mint(aud=RESOURCE, sub="mallory"),
                  auth.mint(aud=RESOURCE, sub="alice", client_id="another-client")):
        replayed = tool(app, "greet", other, **retry)
        assert replayed.json()["error"]["code"] == -32602
        assert len(runs) == 1  # the handler never ran for the replay
    # Stepping up (same principal, more scopes) keeps the flow.
    stepped = auth.mint(aud=RESOURCE, sub="alice", scope="a b")
    done = tool(app, "greet", stepped, **retry).json()["result"]
    assert done["content"][0]["text"] == "Hello Eve"


# -- keys: rotation, refresh limits, outages ---------------------------------------------------

def test_15_keys_rotated_mid_test(auth: AuthServer) -> None:
    app = guarded(auth)
    old = auth.mint(aud=RESOURCE)
    assert tool(app, "whoami", old).status_code == 200
    hits = auth.jwks_hits
    auth.rotate(keep=1)  # new key signs; the old one is still published
    assert tool(app, "whoami", auth.mint(aud=RESOURCE)).status_code == 200
    assert auth.jwks_hits == hits + 1  # the unknown kid fetched the keys once
    assert tool(app, "whoami", old).status_code == 200
    auth.rotate(keep=0)  # the first key is withdrawn
    assert tool(app, "whoami", auth.mint(aud=RESOURCE)).status_code == 200
    assert tool(app, "whoami", old).status_code == 401


def test_15_unknown_kids_refresh_at_most_once_per_interval(auth: AuthServer) -> None:
    app = guarded(auth, jwks_min_refresh=60.0)
    assert tool(app, "whoami", auth.mint(aud=RESOURCE)).status_code == 200
    hits = auth.jwks_hits
    stranger = ec.generate_private_key(ec.SECP256R1())
    for n in range(10):
        forged = auth.mint(aud=RESOURCE, key=stranger, kid=f"kid-{n}")
        assert tool(app, "whoami", forged).status_code == 401
    assert auth.jwks_hits - hits <= 1


@pytest.mark.parametrize("mode", ["down", "hang"])
def test_15_jwks_unreachable_is_a_prompt_503_not_a_hang(mode: str) -> None:
    with AuthServer() as auth:
        auth.jwks_mode = mode
        app = guarded(auth, timeout=1.0, jwks_min_refresh=60.0)
        token = auth.mint(aud=RESOURCE)
        for _ in range(2):  # the second answers at once: no fetch per request while down
            started = time.monotonic()
            response = tool(app, "whoami", token)
            assert response.status_code == 503 and response.headers["retry-after"] == "5"
            assert "www-authenticate" not in response.headers
            assert time.monotonic() - started < 3
        assert auth.jwks_hits == 1


def test_15_cached_keys_keep_working_while_the_issuer_is_down(auth: AuthServer) -> None:
    app = guarded(auth, jwks_max_age=0.0)  # every request tries to refresh
    token = auth.mint(aud=RESOURCE)
    assert tool(app, "whoami", token).status_code == 200
    auth.jwks_mode = "down"
    try:
        assert tool(app, "whoami", token).status_code == 200
    finally:
        auth.jwks_mode = "ok"


def test_15_issuer_with_a_path_is_discovered() -> None:
    with AuthServer(path="/tenant-1") as auth:
        assert auth.issuer.endswith("/tenant-1")
        assert tool(guarded(auth), "whoami", auth.mint(aud=RESOURCE)).status_code == 200


def test_15_configured_jwks_uri_skips_discovery(auth: AuthServer) -> None:
    app = guarded(auth, jwks_uri=f"{auth.issuer}/jwks")
    assert tool(app, "whoami", auth.mint(aud=RESOURCE)).status_code == 200


# -- introspection (RFC 7662) -------------------------------------------------------------------

def test_15_opaque_tokens_are_introspected(auth: AuthServer) -> None:
    app = guarded(auth, introspection_url=f"{auth.issuer}/introspect", client_id="mcp-rs",
                  client_secret="rs-secret")
    good = auth.mint_opaque(aud=RESOURCE, sub="bob", scope="mcp")
    response = tool(app, "whoami", good)
    assert response.json()["result"]["content"][0]["text"] == f"{auth.issuer} bob service mcp"
    for bad in (auth.mint_opaque(aud=RESOURCE, active=False),
                auth.mint_opaque(aud="http://127.0.0.1:8000/other"),
                auth.mint_opaque(aud=RESOURCE, expires_in=-300), "never-issued"):
        assert tool(app, "whoami", bad).status_code == 401
    assert tool(app, "whoami", auth.mint(aud=RESOURCE)).status_code == 200  # JWTs still local


def test_15_introspection_with_wrong_credentials_is_503(auth: AuthServer) -> None:
    app = guarded(auth, introspection_url=f"{auth.issuer}/introspect", client_id="mcp-rs",
                  client_secret="wrong")
    assert tool(app, "whoami", auth.mint_opaque(aud=RESOURCE)).status_code == 503


def test_15_plain_authenticators_get_no_scopes() -> None:
    async def gateway(headers: Any) -> str:
        return "user:1"

    server, runs = secure_app()
    app = McpApp(Dispatcher(server), authenticator=gateway)
    assert send(app, call("write")).status_code == 403 and runs == []
    assert send(app, request("tools/list")).status_code == 200


def test_15_a_malformed_published_key_or_jwks_uri_is_never_a_5xx(
        auth: AuthServer, monkeypatch: pytest.MonkeyPatch) -> None:
    honest = auth.jwks
    broken = {**honest()["keys"][0], "kid": "broken", "x": "!!"}
    monkeypatch.setattr(auth, "jwks", lambda: {"keys": [*honest()["keys"], broken]})
    token = auth.mint(aud=RESOURCE, kid="broken")
    assert tool(guarded(auth), "whoami", token).status_code == 401
    metadata = auth.metadata
    monkeypatch.setattr(auth, "metadata", lambda: {**metadata(), "jwks_uri": "::::"})
    assert tool(guarded(auth), "whoami", auth.mint(aud=RESOURCE)).status_code == 503


def test_15_token_cache_skips_introspection_until_it_ends(auth: AuthServer) -> None:
    now = [time.time()]
    app = McpApp(Dispatcher(secure_app()[0]), authenticator=ResourceServer(
        settings(auth, introspection_url=f"{auth.issuer}/introspect", client_id="mcp-rs",
                 client_secret="rs-secret", token_cache=30.0), clock=lambda: now[0]))
    token = auth.mint_opaque(aud=RESOURCE)
    assert tool(app, "whoami", token).status_code == 200
    auth.opaque[token]["active"] = False  # revoked at the issuer
    assert tool(app, "whoami", token).status_code == 200  # remembered for 30 s
    now[0] += 31
    assert tool(app, "whoami", token).status_code == 401
