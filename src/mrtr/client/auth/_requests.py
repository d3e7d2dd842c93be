"""The HTTP requests of an OAuth client and the decoding of their answers (sans-I/O)."""

# Design: builders return httpx.Request objects and decoders take httpx.Response objects, so
# the flow yields them to whatever sends them (httpx's auth machinery, or a test by hand).
# Client authentication at the token endpoint follows the registration's method: `none`
# (client_id in the body), `client_secret_basic` (RFC 6749 §2.3.1: id and secret are
# form-encoded before Basic), `client_secret_post`, or `private_key_jwt` (RFC 7523 §2.2).
from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from typing import Protocol
from urllib.parse import quote_plus

import httpx
import msgspec

from mrtr.client.auth._metadata import AuthError, ServerMetadata
from mrtr.client.auth._storage import ClientInfo, Tokens

__all__ = [
    "ClientAssertion",
    "decode_registration",
    "decode_tokens",
    "metadata_request",
    "registration_request",
    "token_request",
]

MCP_VERSION_HEADER = "MCP-Protocol-Version"


class ClientAssertion(Protocol):
    """Makes a signed JWT client assertion (RFC 7523) for the token endpoint `audience`."""

    def __call__(self, *, client_id: str, audience: str) -> str: ...


def metadata_request(url: str, version: str | None) -> httpx.Request:
    headers = {"Accept": "application/json"}
    if version:
        headers[MCP_VERSION_HEADER] = version
    return httpx.Request("GET", url, headers=headers)


def registration_request(server: ServerMetadata, metadata: Mapping[str, object]) -> httpx.Request:
    """RFC 7591 §3.1; raises AuthError when the server offers no registration endpoint."""
    if not server.registration_endpoint:
        raise AuthError(f"the authorization server {server.issuer} supports neither dynamic "
                        "client registration nor client ID metadata documents: pass a "
                        "pre-registered client id")
    return httpx.Request("POST", server.registration_endpoint, json=dict(metadata),
                         headers={"Accept": "application/json"})


class _Registration(msgspec.Struct, frozen=True, kw_only=True):
    client_id: str
    client_secret: str | None = None
    token_endpoint_auth_method: str | None = None


def decode_registration(response: httpx.Response, requested_method: str,
                        issuer: str) -> ClientInfo:
    if response.status_code not in (200, 201):
        raise AuthError(f"client registration at {response.request.url} failed: "
                        f"{_oauth_error(response)}")
    try:
        reg = msgspec.json.decode(response.content, type=_Registration)
    except msgspec.DecodeError as exc:
        raise AuthError(f"malformed registration response from {response.request.url}: "
                        f"{exc}") from None
    method = reg.token_endpoint_auth_method or (
        requested_method if reg.client_secret or requested_method == "none" else "none")
    return ClientInfo(client_id=reg.client_id, client_secret=reg.client_secret,
                      token_endpoint_auth_method=method, issuer=issuer)


def token_request(
    server: ServerMetadata,
    client: ClientInfo,
    form: Mapping[str, str],
    *,
    assertion: ClientAssertion | None = None,
) -> httpx.Request:
    """A token endpoint POST carrying `form` and the client's authentication."""
    data = dict(form)
    headers = {"Accept": "application/json"}
    method = client.token_endpoint_auth_method or _secret_method(server, client)
    if assertion is not None or method == "private_key_jwt":
        if assertion is None:
            raise AuthError("private_key_jwt needs a client assertion signer")
        data["client_id"] = client.client_id
        data["client_assertion_type"] = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        data["client_assertion"] = assertion(client_id=client.client_id,
                                             audience=server.issuer)
    elif method == "client_secret_basic" and client.client_secret is not None:
        pair = f"{quote_plus(client.client_id)}:{quote_plus(client.client_secret)}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    elif method == "client_secret_post" and client.client_secret is not None:
        data["client_id"] = client.client_id
        data["client_secret"] = client.client_secret
    else:
        data["client_id"] = client.client_id
    return httpx.Request("POST", server.token_endpoint, data=data, headers=headers)


def _secret_method(server: ServerMetadata, client: ClientInfo) -> str:
    """A pre-registered client's method: what the server supports (basic first, §2.3.1)."""
    if client.client_secret is None:
        return "none"
    offered = server.token_endpoint_auth_methods_supported
    if offered is not None and "client_secret_basic" not in offered \
            and "client_secret_post" in offered:
        return "client_secret_post"
    return "client_secret_basic"


def decode_tokens(response: httpx.Response, *, issuer: str, resource: str | None,
                  now: float | None = None, keep_refresh: str | None = None) -> Tokens:
    """The token response of RFC 6749 §5.1; raises AuthError with the §5.2 error otherwise.

    `keep_refresh` is the refresh token to keep when a refresh answer carries none.
    """
    if response.status_code != 200:
        raise AuthError(f"token request to {response.request.url} failed: "
                        f"{_oauth_error(response)}")
    try:
        tokens = msgspec.json.decode(response.content, type=Tokens, strict=False)
    except msgspec.DecodeError as exc:
        raise AuthError(f"malformed token response from {response.request.url}: {exc}") from None
    if tokens.token_type.lower() not in ("bearer", "dpop"):
        raise AuthError(f"unsupported token type {tokens.token_type!r}")
    at = time.time() if now is None else now
    expires = at + tokens.expires_in if tokens.expires_in is not None else None
    return msgspec.structs.replace(tokens, expires_at=expires, issuer=issuer, resource=resource,
                                   refresh_token=tokens.refresh_token or keep_refresh)


class _OAuthError(msgspec.Struct, frozen=True):
    error: str = "unknown_error"
    error_description: str | None = None


def _oauth_error(response: httpx.Response) -> str:
    try:
        err = msgspec.json.decode(response.content, type=_OAuthError)
    except msgspec.DecodeError:
        return f"HTTP {response.status_code}"
    detail = f" ({err.error_description})" if err.error_description else ""
    return f"HTTP {response.status_code} {err.error}{detail}"
