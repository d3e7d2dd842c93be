"""OAuth against a real authorization server on 127.0.0.1 (uvicorn), through httpx."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mrtr.client.auth import (
    AuthError,
    FileTokenStorage,
    HeadlessRedirect,
    MemoryTokenStorage,
    OAuth,
    OAuthSettings,
    TokenStorage,
)

from .authserver import AuthServer, LiveAS


@pytest.fixture()
def server() -> Iterator[AuthServer]:
    with LiveAS() as app:
        yield app


def oauth(storage: TokenStorage | None = None, **settings: object) -> OAuth:
    return OAuth(redirect=HeadlessRedirect(), storage=storage,
                 settings=OAuthSettings(**settings))  # type: ignore[arg-type]


async def get(server: AuthServer, auth: OAuth, times: int = 1) -> list[httpx.Response]:
    async with httpx.AsyncClient(auth=auth, timeout=10.0) as http:
        return [await asyncio.wait_for(http.post(server.resource, content=b"{}"), 20)
                for _ in range(times)]


def test_discovers_registers_and_authorizes_with_pkce(server: AuthServer) -> None:
    [reply] = asyncio.run(get(server, oauth()))
    assert reply.status_code == 200 and reply.json()["sub"] == "user-1"
    assert server.paths() == [
        "/mcp",  # 401 with resource_metadata
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/register", "/authorize", "/token", "/mcp"]
    authorize = next(p for _, path, p in server.log if path == "/authorize")
    assert authorize["code_challenge_method"] == "S256"
    assert authorize["resource"] == server.resource
    # The challenge's scope, plus offline_access because the server offers it (SEP-2207).
    assert authorize["scope"] == "mcp:read offline_access"
    register = next(c for c in server.clients.values())
    assert register["application_type"] == "native"
    assert "refresh_token" in register["grant_types"]


def test_a_second_request_reuses_the_token(server: AuthServer) -> None:
    replies = asyncio.run(get(server, oauth(), times=3))
    assert [r.status_code for r in replies] == [200, 200, 200]
    assert server.paths().count("/authorize") == 1


def test_an_expiring_token_is_refreshed_not_reauthorized(server: AuthServer) -> None:
    server.token_lifetime = 5  # inside the 30 s margin: stale at once
    replies = asyncio.run(get(server, oauth(), times=2))
    assert [r.status_code for r in replies] == [200, 200]
    grants = [p.get("grant_type") for _, path, p in server.log if path == "/token"]
    assert grants == ["authorization_code", "refresh_token"]
    assert server.paths().count("/authorize") == 1
    refresh = [p for _, path, p in server.log if p.get("grant_type") == "refresh_token"][0]
    assert refresh["resource"] == server.resource


def test_a_refused_refresh_token_falls_back_to_authorization(server: AuthServer) -> None:
    server.token_lifetime = 5
    auth = oauth()
    asyncio.run(get(server, auth))
    server.refresh.clear()  # the server forgot every refresh token
    [reply] = asyncio.run(get(server, auth))
    assert reply.status_code == 200
    assert server.paths().count("/authorize") == 2


def test_a_revoked_access_token_is_refreshed_before_asking_the_user(server: AuthServer) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    auth = oauth()
    asyncio.run(get(server, auth))
    server.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # rotated
    [reply] = asyncio.run(get(server, auth))
    assert reply.status_code == 200
    grants = [p.get("grant_type") for _, path, p in server.log if path == "/token"]
    assert grants == ["authorization_code", "refresh_token"]
    assert server.paths().count("/authorize") == 1


def test_insufficient_scope_steps_up_with_the_union(server: AuthServer) -> None:
    server.required_scopes = ["mcp:read", "mcp:write"]
    [reply] = asyncio.run(get(server, oauth()))
    assert reply.status_code == 200
    scopes = [p["scope"] for _, path, p in server.log if path == "/authorize"]
    assert scopes == ["mcp:read offline_access", "mcp:read offline_access mcp:write"]


def test_step_up_gives_up_after_the_limit(server: AuthServer) -> None:
    server.required_scopes = ["mcp:admin"]
    server.challenge_scope = "mcp:admin"
    server.withheld = {"mcp:admin"}
    with pytest.raises(AuthError, match="after 2 step-up"):
        asyncio.run(get(server, oauth(max_step_ups=2)))
    assert server.paths().count("/authorize") == 3  # the first grant and two step-ups


def test_metadata_for_another_issuer_is_rejected(server: AuthServer) -> None:
    server.metadata_issuer = "https://attacker.example"
    with pytest.raises(AuthError, match="is for issuer 'https://attacker.example'"):
        asyncio.run(get(server, oauth()))
    assert "/authorize" not in server.paths() and "/register" not in server.paths()


@pytest.mark.parametrize("body", [b"not json", b'{"issuer": 5}', b"[]", b'{"token_endpoint": 1}'])
def test_malformed_metadata_is_a_clear_error_not_a_hang(server: AuthServer, body: bytes) -> None:
    server.metadata_body = body
    with pytest.raises(AuthError, match="malformed authorization server metadata at http"):
        asyncio.run(get(server, oauth()))


def test_malformed_resource_metadata_is_a_clear_error(server: AuthServer) -> None:
    server.prm_body = b'{"resource": "x", "authorization_servers": []}'
    with pytest.raises(AuthError, match="names no authorization server"):
        asyncio.run(get(server, oauth()))


def test_a_wrong_iss_in_the_redirect_is_rejected_before_the_token_request(
        server: AuthServer) -> None:
    server.iss_in_redirect = "wrong"
    with pytest.raises(AuthError, match="comes from issuer 'https://evil.example'"):
        asyncio.run(get(server, oauth()))
    assert "/token" not in server.paths()


def test_a_stalled_metadata_endpoint_times_out(server: AuthServer) -> None:
    server.stall_metadata = True

    async def go() -> None:
        async with httpx.AsyncClient(auth=oauth(timeout=0.5), timeout=5) as http:
            await http.post(server.resource, content=b"{}")

    with pytest.raises(httpx.ReadTimeout):
        asyncio.run(asyncio.wait_for(go(), 10))


def test_file_storage_is_0600_and_reused_by_the_next_run(
        server: AuthServer, tmp_path: Path) -> None:
    path = tmp_path / "tokens" / "server.json"
    asyncio.run(get(server, oauth(FileTokenStorage(path))))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    [reply] = asyncio.run(get(server, oauth(FileTokenStorage(path))))  # a new process, say
    assert reply.status_code == 200
    assert server.paths().count("/authorize") == 1 and server.paths().count("/register") == 1


def test_a_registration_bound_to_another_issuer_is_not_presented(server: AuthServer) -> None:
    from mrtr.client.auth import ClientInfo

    storage = MemoryTokenStorage(client=ClientInfo(client_id="from-elsewhere",
                                                   issuer="https://old-as.example"))
    [reply] = asyncio.run(get(server, oauth(storage)))
    assert reply.status_code == 200
    assert all(p.get("client_id") != "from-elsewhere" for _, _, p in server.log)
    assert server.paths().count("/register") == 1


def test_the_transport_takes_auth_and_refuses_it_beside_a_client_of_yours() -> None:
    from mrtr.client import HTTPTransport

    async def go() -> None:
        transport = HTTPTransport("http://127.0.0.1:9/mcp", auth=oauth())
        await transport.aclose()
        async with httpx.AsyncClient() as mine:
            with pytest.raises(ValueError, match="give auth to your own httpx client"):
                HTTPTransport("http://127.0.0.1:9/mcp", client=mine, auth=oauth())

    asyncio.run(go())
