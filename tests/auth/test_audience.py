"""Tokens only for us (#26): the resource URL from configuration, `typ` at+jwt, the issuer of an
introspection answer. In process against a real local authorization server; `mrtr serve` over
real HTTP is in test_serve_audience.py."""

from __future__ import annotations

import argparse
import logging
from typing import Any

import httpx
import pytest

from mrtr.auth import AuthSettings, ResourceServer
from mrtr.cli import build_parser
from mrtr.cli._serve_cli import _auth_settings
from mrtr.http import McpApp
from mrtr.http._hosts import bound_resource
from mrtr.server import Dispatcher
from mrtr.serving._resource import check_forwarded, resource_settings
from tests.auth.authserver import AuthServer
from tests.auth.conftest import RESOURCE, guarded, secure_app, settings, tool
from tests.transports.conftest import LiveServer, call, post_args, run

REFUSED = 'Bearer error="invalid_token", resource_metadata='
PUBLIC = "https://mcp.example.com/mcp"


# -- typ (RFC 9068 §4) ---------------------------------------------------------------------------

@pytest.mark.parametrize("typ", ["at+jwt", "AT+JWT", "application/at+jwt", "Application/At+JWT"])
def test_26_access_token_types_are_accepted_in_any_case(auth: AuthServer, typ: str) -> None:
    assert tool(guarded(auth), "whoami", auth.mint(aud=RESOURCE, typ=typ)).status_code == 200


@pytest.mark.parametrize("typ", ["JWT", None, "jwt", "id+jwt", "dpop+jwt", "at+jwt2",
                                 "application/jwt", ""])
def test_26_a_jwt_that_is_not_an_access_token_is_401_and_the_reason_logged(
        auth: AuthServer, typ: str | None, caplog: pytest.LogCaptureFixture) -> None:
    """An ID token (`typ` JWT) signed by our issuer for our audience is still not an access
    token; nor is a JWT without `typ`. (RFC 9068 §4: reject any other value.)"""
    token = auth.mint(aud=RESOURCE, typ=typ)
    with caplog.at_level(logging.INFO, logger="mrtr.auth"):
        response = tool(guarded(auth), "whoami", token)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith(REFUSED)
    assert any("not at+jwt" in r.getMessage() for r in caplog.records), caplog.text
    assert "typ" not in response.text  # the reason is for the log only


def test_26_require_at_jwt_false_accepts_an_issuer_that_omits_typ(auth: AuthServer) -> None:
    lenient = guarded(auth, require_at_jwt=False)
    for typ in ("JWT", None, "at+jwt"):
        assert tool(lenient, "whoami", auth.mint(aud=RESOURCE, typ=typ)).status_code == 200
    # Everything else is still checked.
    assert tool(lenient, "whoami", auth.mint(aud="http://127.0.0.1:1/mcp", typ="JWT")
                ).status_code == 401


def _serve_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", "app.py:app", *argv])


def test_26_the_typ_opt_out_from_the_command_line_and_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("MRTR_AUTH_REQUIRE_AT_JWT", "MRTR_AUTH_ISSUER", "MRTR_AUTH_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    issuer = ["--auth-issuer", "https://login.example.com"]
    on = _auth_settings(_serve_args(*issuer))
    assert on is not None and on.require_at_jwt is True
    off = _auth_settings(_serve_args(*issuer, "--auth-skip-typ-check"))
    assert off is not None and off.require_at_jwt is False
    for text, expected in (("0", False), ("false", False), ("no", False), ("1", True),
                           ("ON", True)):
        env = {"MRTR_AUTH_ISSUER": "https://login.example.com", "MRTR_AUTH_REQUIRE_AT_JWT": text}
        read = AuthSettings.from_env(env)
        assert read is not None and read.require_at_jwt is expected, text
    with pytest.raises(ValueError, match="MRTR_AUTH_REQUIRE_AT_JWT"):
        AuthSettings.from_env({"MRTR_AUTH_ISSUER": "https://a.example",
                               "MRTR_AUTH_REQUIRE_AT_JWT": "maybe"})
    lenient = AuthSettings(issuer="https://a.example", require_at_jwt=False)
    assert AuthSettings.from_json(lenient.to_json()) == lenient  # what workers get


# -- introspection (RFC 7662): only our issuer's answers -----------------------------------------

def _introspecting(auth: AuthServer) -> McpApp:
    return guarded(auth, introspection_url=f"{auth.issuer}/introspect", client_id="mcp-rs",
                   client_secret="rs-secret")


def test_26_an_introspected_token_of_another_issuer_is_refused(
        auth: AuthServer, caplog: pytest.LogCaptureFixture) -> None:
    """The endpoint says the token is active, but for another authorization server."""
    app = _introspecting(auth)
    for other in ("http://127.0.0.1:1/evil", auth.issuer + "/", auth.issuer.upper()):
        token = auth.mint_opaque(aud=RESOURCE, iss=other)
        with caplog.at_level(logging.INFO, logger="mrtr.auth"):
            response = tool(app, "whoami", token)
        assert response.status_code == 401, other
        assert response.headers["www-authenticate"].startswith(REFUSED)
        assert f"introspection: issuer {other!r}" in caplog.text
    ours = auth.mint_opaque(aud=RESOURCE, sub="bob", scope="mcp")
    assert tool(app, "whoami", ours).json()["result"]["content"][0]["text"] == (
        f"{auth.issuer} bob service mcp")


def test_26_an_introspection_answer_without_iss_is_the_configured_issuers(
        auth: AuthServer) -> None:
    """Documented choice: `iss` is optional in RFC 7662; the configured endpoint vouches."""
    token = auth.mint_opaque(aud=RESOURCE, sub="carol", with_iss=False)
    assert "iss" not in auth.opaque[token]
    reply = tool(_introspecting(auth), "whoami", token)
    assert reply.json()["result"]["content"][0]["text"] == f"{auth.issuer} carol service "


# -- the resource URL of an McpApp built by hand -------------------------------------------------

def _post(app: McpApp, token: str, base: str, **headers: str) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url=base) as client:
            args = post_args(call("whoami"), authorization=f"Bearer {token}")
            args["headers"].update(headers)
            return await client.post("/mcp", **args)
    return run(go())


def test_26_a_hand_built_app_never_takes_its_audience_from_the_request(
        auth: AuthServer) -> None:
    app = guarded(auth)
    assert _post(app, auth.mint(aud=RESOURCE), "http://127.0.0.1:8000").status_code == 200
    others = {"http://127.0.0.1:9999/mcp": {"host": "127.0.0.1:9999"},
              "http://localhost:8000/mcp": {"host": "localhost:8000"},
              "https://127.0.0.1:8000/mcp": {"x-forwarded-proto": "https"},
              "https://localhost/mcp": {"host": "localhost", "x-forwarded-proto": "https",
                                        "x-forwarded-host": "localhost",
                                        "forwarded": "proto=https;host=localhost"}}
    for aud, headers in others.items():
        response = _post(app, auth.mint(aud=aud), "http://127.0.0.1:8000", **headers)
        assert response.status_code == 401, (aud, headers)
        assert f'"{RESOURCE.replace("/mcp", "")}/.well-known/oauth-protected-resource/mcp"' in \
            response.headers["www-authenticate"], headers


def test_26_the_bound_address_is_the_resource_under_a_real_uvicorn(auth: AuthServer) -> None:
    """uvicorn's defaults believe X-Forwarded-Proto from 127.0.0.1 (scope["scheme"] becomes
    https); the derived resource is http and the socket's address whatever the client says."""
    app = McpApp(Dispatcher(secure_app()[0]), authenticator=ResourceServer(settings(auth)))
    with LiveServer(app, proxy_headers=True, forwarded_allow_ips="127.0.0.1") as live:
        ours = f"{live.url}/mcp"
        lying = {"x-forwarded-proto": "https", "host": "localhost:1"}
        assert _live_post(ours, auth.mint(aud=ours), lying).status_code == 200
        for aud in (f"https://127.0.0.1:{live.port}/mcp", "http://localhost:1/mcp",
                    "https://localhost:1/mcp"):
            assert _live_post(ours, auth.mint(aud=aud), lying).status_code == 401, aud
        prm = httpx.get(f"{live.url}/.well-known/oauth-protected-resource/mcp",
                        headers=lying, timeout=10)
        assert prm.json()["resource"] == ours


def _live_post(url: str, token: str, headers: dict[str, str]) -> httpx.Response:
    args = post_args(call("whoami"), authorization=f"Bearer {token}")
    args["headers"].update(headers)
    return httpx.post(url, timeout=10, **args)


def test_26_a_configured_resource_wins_over_the_bound_address(auth: AuthServer) -> None:
    app = guarded(auth, resource="https://mcp.example.com/mcp")
    public = auth.mint(aud="https://mcp.example.com/mcp")
    assert _post(app, public, "http://127.0.0.1:8000").status_code == 200
    assert _post(app, auth.mint(aud=RESOURCE), "http://127.0.0.1:8000").status_code == 401


@pytest.mark.parametrize(("server", "expected"), [
    (("127.0.0.1", 8000), "http://127.0.0.1:8000/mcp"),
    (("::1", 9000), "http://[::1]:9000/mcp"),
    (("10.0.0.7", 80), "http://10.0.0.7/mcp"),
    (("127.0.0.1", None), "http://127.0.0.1/mcp"),  # httpx: the scheme's default port
    (("/run/mrtr.sock", None), "http://localhost/mcp"),  # a Unix socket
    (None, "http://localhost/mcp"),
])
def test_26_bound_resource_reads_only_the_socket(server: Any, expected: str) -> None:
    scope = {"server": server, "scheme": "https",
             "headers": [(b"host", b"evil.example"), (b"x-forwarded-proto", b"https")]}
    assert bound_resource(scope, "/mcp") == expected


# -- mrtr serve's resource URL and trusted proxies, as settings ----------------------------------

@pytest.mark.parametrize(("host", "port", "path", "expected"), [
    ("127.0.0.1", 8000, "/mcp", "http://127.0.0.1:8000/mcp"),
    ("localhost", 9000, "/api/mcp", "http://localhost:9000/api/mcp"),
    ("::1", 8000, "/mcp", "http://[::1]:8000/mcp"),
    ("[::1]", 8000, "/mcp", "http://[::1]:8000/mcp"),
    ("127.0.0.1", 0, "/mcp", None),  # known once bound: the McpApp reads its socket
])
def test_26_mrtr_serve_derives_the_resource_once_from_its_bind(
        host: str, port: int, path: str, expected: str | None) -> None:
    auth = AuthSettings(issuer="https://login.example.com")
    assert resource_settings(auth, host, port, path).resource == expected
    given = AuthSettings(issuer="https://login.example.com", resource=PUBLIC)
    assert resource_settings(given, host, port, path) is given
    assert resource_settings(given, "0.0.0.0", port, path) is given


@pytest.mark.parametrize("host", ["0.0.0.0", "", "::", "10.0.0.5", "mcp.example.com"])
def test_26_mrtr_serve_refuses_a_public_bind_without_a_resource(host: str) -> None:
    with pytest.raises(ValueError, match="needs --auth-resource URL"):
        resource_settings(AuthSettings(issuer="https://login.example.com"), host, 8000, "/mcp")


def test_26_forwarded_allow_ips_must_name_addresses_or_networks() -> None:
    assert check_forwarded(()) == []
    assert check_forwarded(["10.0.0.1, 10.1.0.0/16", "::1"]) == [
        "10.0.0.1", "10.1.0.0/16", "::1"]
    assert check_forwarded(["10.0.0.1", "*"]) == ["*"]
    for bad in ("nginx", "10.0.0.300", "10.0.0.1/99"):
        with pytest.raises(ValueError, match="forwarded-allow-ips"):
            check_forwarded([bad])
