"""Discovery URLs, WWW-Authenticate parsing, issuer and resource checks."""

from __future__ import annotations

import httpx
import pytest

from mrtr.client.auth import (
    AuthError,
    ProtectedResourceMetadata,
    parse_challenge,
    resource_metadata_urls,
    server_metadata_urls,
)
from mrtr.client.auth._metadata import decode_server_metadata, resource_for


def test_resource_metadata_order_challenge_then_path_then_root() -> None:
    assert resource_metadata_urls("https://rs.example/custom.json", "https://rs.example/a/mcp") == [
        "https://rs.example/custom.json",
        "https://rs.example/.well-known/oauth-protected-resource/a/mcp",
        "https://rs.example/.well-known/oauth-protected-resource"]
    assert resource_metadata_urls(None, "http://127.0.0.1:9/") == [
        "http://127.0.0.1:9/.well-known/oauth-protected-resource"]


def test_server_metadata_order_for_root_and_path_issuers() -> None:
    assert server_metadata_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration"]
    assert server_metadata_urls("https://as.example/tenant1/") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration"]


def challenge(header: str) -> httpx.Response:
    return httpx.Response(401, headers={"WWW-Authenticate": header})


def test_parse_challenge_quoted_unquoted_and_escaped() -> None:
    got = parse_challenge(challenge(
        'Bearer error="insufficient_scope", scope="a b", resource_metadata="https://x/y?q=1,2"'))
    assert (got.error, got.scope, got.resource_metadata) == (
        "insufficient_scope", "a b", "https://x/y?q=1,2")
    got = parse_challenge(challenge('Bearer realm="r\\"x", error=invalid_token'))
    assert got.error == "invalid_token" and got.scope is None
    assert parse_challenge(httpx.Response(401)).resource_metadata is None


@pytest.mark.parametrize(("header", "oauth"), [
    ("", True), ("Bearer", True), ('DPoP resource_metadata="x"', True),
    ('Basic realm="api"', False), ("ApiKey", False)])
def test_only_bearer_and_dpop_challenges_are_oauth(header: str, oauth: bool) -> None:
    response = httpx.Response(401, headers={"WWW-Authenticate": header} if header else {})
    assert parse_challenge(response).oauth is oauth


META = b'{"issuer": "https://as.example", "token_endpoint": "https://as.example/t"}'


def test_issuer_must_match_exactly() -> None:
    assert decode_server_metadata(META, "u", "https://as.example").issuer == "https://as.example"
    with pytest.raises(AuthError, match="is for issuer"):
        decode_server_metadata(META, "u", "https://as.example/")  # RFC 8414 §3.3: no normalising


def test_metadata_without_s256_is_refused() -> None:
    body = META[:-1] + b', "code_challenge_methods_supported": ["plain"]}'
    with pytest.raises(AuthError, match="PKCE S256"):
        decode_server_metadata(body, "u", "https://as.example")


def prm(resource: str) -> ProtectedResourceMetadata:
    return ProtectedResourceMetadata(resource=resource, authorization_servers=["https://as"])


def test_resource_is_the_prm_value_verbatim_when_it_covers_the_server() -> None:
    assert resource_for("https://rs.example/mcp", prm("https://rs.example")) == "https://rs.example"
    assert resource_for("https://rs.example/mcp", prm("https://rs.example/mcp")) == \
        "https://rs.example/mcp"
    assert resource_for("https://rs.example/mcp#f", None) == "https://rs.example/mcp"


@pytest.mark.parametrize("other", ["https://evil.example/mcp", "http://rs.example/mcp",
                                   "https://rs.example/other", "https://rs.example/mcpx"])
def test_resource_for_another_server_is_rejected(other: str) -> None:
    with pytest.raises(AuthError, match="protected resource metadata is for"):
        resource_for("https://rs.example/mcp", prm(other))
