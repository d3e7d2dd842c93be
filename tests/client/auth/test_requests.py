"""Token, registration and metadata requests: client authentication and error decoding."""

from __future__ import annotations

import base64
from urllib.parse import parse_qs

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mrtr.client.auth import AuthError, ClientInfo, PrivateKeyJWT, ServerMetadata
from mrtr.client.auth._requests import decode_registration, decode_tokens, token_request

SERVER = ServerMetadata(issuer="https://as.example", token_endpoint="https://as.example/token")
FORM = {"grant_type": "client_credentials"}


def body(request: httpx.Request) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(request.read().decode()).items()}


def test_client_secret_basic_form_encodes_id_and_secret() -> None:
    client = ClientInfo(client_id="a b:c", client_secret="s/é+",
                        token_endpoint_auth_method="client_secret_basic")
    request = token_request(SERVER, client, FORM)
    pair = base64.b64decode(request.headers["authorization"].removeprefix("Basic ")).decode()
    assert pair == "a+b%3Ac:s%2F%C3%A9%2B"  # RFC 6749 §2.3.1
    assert "client_secret" not in body(request) and "client_id" not in body(request)


def test_client_secret_post_and_none() -> None:
    post = token_request(SERVER, ClientInfo(client_id="c", client_secret="s",
                                            token_endpoint_auth_method="client_secret_post"), FORM)
    assert body(post) == {**FORM, "client_id": "c", "client_secret": "s"}
    assert "authorization" not in post.headers
    public = token_request(SERVER, ClientInfo(client_id="c"), FORM)
    assert body(public) == {**FORM, "client_id": "c"}


def test_private_key_jwt_assertion_verifies_with_the_public_key() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    client = ClientInfo(client_id="bot", token_endpoint_auth_method="private_key_jwt")
    request = token_request(SERVER, client, FORM, assertion=PrivateKeyJWT(pem))
    sent = body(request)
    assert sent["client_assertion_type"] == \
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    claims = jwt.decode(sent["client_assertion"], key.public_key(), algorithms=["ES256"],
                        audience="https://as.example")
    assert claims["iss"] == claims["sub"] == "bot" and claims["jti"]
    with pytest.raises(AuthError, match="needs a client assertion"):
        token_request(SERVER, client, FORM)


def answer(status: int, content: bytes) -> httpx.Response:
    return httpx.Response(status, content=content,
                          request=httpx.Request("POST", "https://as.example/token"))


def test_token_errors_name_the_oauth_error() -> None:
    with pytest.raises(AuthError, match="HTTP 400 invalid_grant \\(code reused\\)"):
        decode_tokens(answer(400, b'{"error": "invalid_grant", "error_description": '
                                  b'"code reused"}'), issuer="i", resource=None)
    with pytest.raises(AuthError, match="HTTP 502"):
        decode_tokens(answer(502, b"<html>"), issuer="i", resource=None)
    with pytest.raises(AuthError, match="malformed token response"):
        decode_tokens(answer(200, b'{"token_type": "Bearer"}'), issuer="i", resource=None)
    with pytest.raises(AuthError, match="unsupported token type"):
        decode_tokens(answer(200, b'{"access_token": "t", "token_type": "mac"}'),
                      issuer="i", resource=None)


def test_token_expiry_accepts_a_string_and_keeps_the_old_refresh_token() -> None:
    tokens = decode_tokens(answer(200, b'{"access_token": "t", "expires_in": "60"}'),
                           issuer="i", resource="r", now=1000.0, keep_refresh="old")
    assert tokens.expires_at == 1060.0 and tokens.refresh_token == "old"
    assert tokens.issuer == "i" and tokens.resource == "r"


def test_registration_binds_the_client_to_its_issuer() -> None:
    client = decode_registration(answer(201, b'{"client_id": "c", "client_secret": "s"}'),
                                 "client_secret_basic", "https://as.example")
    assert client.issuer == "https://as.example"
    assert client.token_endpoint_auth_method == "client_secret_basic"
    with pytest.raises(AuthError, match="registration .* failed: HTTP 400 invalid_client_metadata"):
        decode_registration(answer(400, b'{"error": "invalid_client_metadata"}'), "none", "i")


def test_a_secret_without_a_method_follows_what_the_server_supports() -> None:
    client = ClientInfo(client_id="c", client_secret="s")
    assert "authorization" in token_request(SERVER, client, FORM).headers
    post_only = ServerMetadata(issuer="https://as.example", token_endpoint="https://as.example/t",
                               token_endpoint_auth_methods_supported=["client_secret_post"])
    request = token_request(post_only, client, FORM)
    assert "authorization" not in request.headers and body(request)["client_secret"] == "s"
