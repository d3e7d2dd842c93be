"""The sans-I/O flow, driven by hand: what it asks for, in which order, and when it stops."""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

import httpx
import pytest

from mrtr.client.auth import (
    AuthError,
    AuthFlow,
    Authorize,
    AuthStep,
    Callback,
    ClientInfo,
    HTTPSend,
    MemoryTokenStorage,
    OAuthSettings,
    RedirectUri,
    ServerMetadata,
    check_callback,
)

RS = "https://rs.example/mcp"
AS = "https://as.example"
ASM = {"issuer": AS, "authorization_endpoint": AS + "/authorize", "token_endpoint": AS + "/token",
       "registration_endpoint": AS + "/register", "scopes_supported": ["a", "b"]}


def flow(**settings: object) -> AuthFlow:
    storage = MemoryTokenStorage(client=ClientInfo(client_id="pre"))
    return AuthFlow(storage=storage, grant="authorization_code",
                    settings=OAuthSettings(**settings), assertion=None,  # type: ignore[arg-type]
                    clock=lambda: 1000.0)


def reply(step: httpx.Request, status: int, body: object = None,
          headers: dict[str, str] | None = None) -> httpx.Response:
    content = json.dumps(body).encode() if body is not None else b""
    return httpx.Response(status, content=content, headers=headers, request=step)


def walk(gen: Generator[AuthStep, object, None], server: dict[str, Any],
         asked: list[str] | None = None) -> list[str]:
    """Answer each step from `server` (by URL without query); return what was asked, in order."""
    asked = [] if asked is None else asked
    answer: object = None
    while True:
        try:
            step = gen.send(answer)
        except StopIteration:
            return asked
        if isinstance(step, HTTPSend):
            asked.append("SEND " + step.request.headers.get("authorization", "-"))
            answer = server["SEND"].pop(0)
        elif isinstance(step, RedirectUri):
            answer = "http://127.0.0.1:1/cb"
        elif isinstance(step, Authorize):
            asked.append("AUTHORIZE")
            state = httpx.URL(step.url).params["state"]
            answer = Callback(code="c", state=state, iss=AS)
        else:
            assert isinstance(step, httpx.Request)
            url = str(step.url.copy_with(query=None))
            asked.append(f"{step.method} {url}")
            spec = server.get(url, (404, None))
            status, body = spec
            answer = reply(step, status, body)


def start(**settings: object) -> tuple[AuthFlow, Generator[AuthStep, object, None]]:
    f = flow(**settings)
    return f, f.run(httpx.Request("POST", RS))


def unauthorized(header: str) -> httpx.Response:
    return httpx.Response(401, headers={"WWW-Authenticate": header})


def test_discovery_falls_back_from_path_to_root_then_oidc() -> None:
    _, gen = start()
    token = {"access_token": "T", "token_type": "Bearer", "expires_in": 60}
    asked = walk(gen, {
        "SEND": [unauthorized("Bearer"), httpx.Response(200)],
        "https://rs.example/.well-known/oauth-protected-resource": (
            200, {"resource": RS, "authorization_servers": [AS]}),
        AS + "/.well-known/openid-configuration": (200, ASM),
        AS + "/token": (200, token)})
    assert asked == [
        "SEND -",
        "GET https://rs.example/.well-known/oauth-protected-resource/mcp",
        "GET https://rs.example/.well-known/oauth-protected-resource",
        "GET https://as.example/.well-known/oauth-authorization-server",
        "GET https://as.example/.well-known/openid-configuration",
        "AUTHORIZE", "POST https://as.example/token", "SEND Bearer T"]


def test_the_challenge_metadata_url_comes_first() -> None:
    _, gen = start()
    asked = walk(gen, {
        "SEND": [unauthorized('Bearer resource_metadata="https://rs.example/m.json"'),
                 httpx.Response(200)],
        "https://rs.example/m.json": (200, {"resource": RS, "authorization_servers": [AS]}),
        AS + "/.well-known/oauth-authorization-server": (200, ASM),
        AS + "/token": (200, {"access_token": "T"})})
    assert asked[1] == "GET https://rs.example/m.json" and asked[2].endswith(
        "/.well-known/oauth-authorization-server")


def test_scope_comes_from_prm_when_the_challenge_has_none() -> None:
    f, gen = start()
    walk(gen, {"SEND": [unauthorized("Bearer"), httpx.Response(200)],
               "https://rs.example/.well-known/oauth-protected-resource/mcp": (
                   200, {"resource": RS, "authorization_servers": [AS],
                         "scopes_supported": ["x", "y"]}),
               AS + "/.well-known/oauth-authorization-server": (200, ASM),
               AS + "/token": (200, {"access_token": "T"})})
    tokens = f.storage.load_tokens()
    assert tokens is not None and tokens.scope == "x y"


def test_step_up_limit_counts_across_requests() -> None:
    f, gen = start(max_step_ups=1)
    forbidden = httpx.Response(403, headers={
        "WWW-Authenticate": 'Bearer error="insufficient_scope", scope="admin"'})
    server = {"SEND": [unauthorized('Bearer scope="admin"'), forbidden, forbidden],
              "https://rs.example/.well-known/oauth-protected-resource/mcp": (
                  200, {"resource": RS, "authorization_servers": [AS]}),
              AS + "/.well-known/oauth-authorization-server": (200, ASM),
              AS + "/token": (200, {"access_token": "T", "scope": "read"})}
    with pytest.raises(AuthError, match="after 1 step-up"):
        walk(gen, server)
    server["SEND"] = [forbidden]
    asked: list[str] = []
    with pytest.raises(AuthError, match="step-up"):  # no new authorization for the next call
        walk(f.run(httpx.Request("POST", RS)), server, asked)
    assert asked == ["SEND Bearer T"]


def test_a_server_that_keeps_refusing_fresh_tokens_is_an_error() -> None:
    _, gen = start()
    server = {"SEND": [unauthorized("Bearer")] * 4,
              "https://rs.example/.well-known/oauth-protected-resource/mcp": (
                  200, {"resource": RS, "authorization_servers": [AS]}),
              AS + "/.well-known/oauth-authorization-server": (200, ASM),
              AS + "/token": (200, {"access_token": "T"})}
    with pytest.raises(AuthError, match="refused the access token"):
        walk(gen, server)


SERVER = ServerMetadata(issuer=AS, token_endpoint=AS + "/t",
                        authorization_response_iss_parameter_supported=True)


@pytest.mark.parametrize(("callback", "message"), [
    (Callback(code="c", state="s", iss=AS + "/"), "comes from issuer"),
    (Callback(code="c", state="s", iss="https://evil"), "comes from issuer"),
    (Callback(code="c", state="s"), "lacks the iss"),
    (Callback(code="c", state="other", iss=AS), "another state"),
    (Callback(error="access_denied", state="s"), "access_denied"),
])
def test_callback_checks(callback: Callback, message: str) -> None:
    with pytest.raises(AuthError, match=message):
        check_callback(callback, "s", SERVER)


def test_callback_without_iss_is_fine_when_not_advertised() -> None:
    quiet = ServerMetadata(issuer=AS, token_endpoint=AS + "/t")
    assert check_callback(Callback(code="c", state="s"), "s", quiet) == "c"
    with pytest.raises(AuthError, match="comes from issuer"):  # but a present one is compared
        check_callback(Callback(code="c", state="s", iss="https://evil"), "s", quiet)


def test_a_token_for_another_resource_is_not_sent() -> None:
    from mrtr.client.auth import Tokens

    f = flow()
    f.storage.save_tokens(Tokens(access_token="FOR-B", resource="https://b.example/mcp"))
    asked: list[str] = []
    walk(f.run(httpx.Request("POST", RS)), {"SEND": [httpx.Response(200)]}, asked)
    assert asked == ["SEND -"]
    f.storage.save_tokens(Tokens(access_token="FOR-RS", resource="https://rs.example"))
    asked = walk(f.run(httpx.Request("POST", RS)), {"SEND": [httpx.Response(200)]})
    assert asked == ["SEND Bearer FOR-RS"]  # a resource covering the server URL is fine


def test_a_401_for_another_scheme_is_left_to_the_caller() -> None:
    _, gen = start()
    asked = walk(gen, {"SEND": [unauthorized('Basic realm="api"')]})
    assert asked == ["SEND -"]  # no discovery: the 401 goes back as it came
