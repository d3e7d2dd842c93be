"""OAuth metadata documents (RFC 9728, RFC 8414, OIDC), their discovery URLs and checks."""

# Design: every document is decoded once into a frozen Struct; a document that does not decode
# is reported with its URL (AuthError), never retried in a loop. Issuers and resources are
# compared as plain strings (RFC 3986 §6.2.1 simple comparison), as RFC 8414 §3.3 and RFC 9207
# require: "https://as.example/" and "https://as.example" are different issuers.
from __future__ import annotations

import re

import httpx
import msgspec

from mrtr.client._errors import ClientError

__all__ = [
    "AuthError",
    "Challenge",
    "covers",
    "ProtectedResourceMetadata",
    "ServerMetadata",
    "parse_challenge",
    "resource_for",
    "resource_metadata_urls",
    "server_metadata_urls",
]


class AuthError(ClientError):
    """OAuth authorization failed (discovery, registration, the redirect or a token request)."""


class ProtectedResourceMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """RFC 9728 §2: what the MCP server says about itself."""

    resource: str
    authorization_servers: list[str] = []
    scopes_supported: list[str] | None = None


class ServerMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """RFC 8414 §2 / OpenID Connect Discovery: the authorization server's endpoints."""

    issuer: str
    token_endpoint: str
    authorization_endpoint: str | None = None
    registration_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    grant_types_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None
    code_challenge_methods_supported: list[str] | None = None
    authorization_response_iss_parameter_supported: bool = False
    client_id_metadata_document_supported: bool = False


class Challenge(msgspec.Struct, frozen=True, kw_only=True):
    """The parameters of a `WWW-Authenticate: Bearer ...` challenge (RFC 6750 §3)."""

    scheme: str = ""  # lower case; "" when the response has no challenge
    error: str | None = None
    scope: str | None = None
    resource_metadata: str | None = None

    @property
    def oauth(self) -> bool:
        """True unless the challenge names another scheme (Basic, an API key gateway's...)."""
        return self.scheme in ("", "bearer", "dpop")


_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


def parse_challenge(response: httpx.Response) -> Challenge:
    """The Bearer (or DPoP) challenge of a 401/403 response; empty when there is none."""
    header = response.headers.get("www-authenticate", "")
    params: dict[str, str] = {}
    for match in _PARAM.finditer(header):
        name = match.group(1).lower()
        value = match.group(2) if match.group(2) is not None else match.group(3)
        params.setdefault(name, re.sub(r"\\(.)", r"\1", value))
    scheme = header.strip().split(" ", 1)[0].rstrip(",").lower() if header.strip() else ""
    return Challenge(scheme=scheme, error=params.get("error"), scope=params.get("scope") or None,
                     resource_metadata=params.get("resource_metadata"))


def resource_metadata_urls(challenge_url: str | None, server_url: str) -> list[str]:
    """RFC 9728 §3.1 order: the challenge's URL, the path-suffixed well-known, the root one."""
    url = httpx.URL(server_url)
    origin = f"{url.scheme}://{url.netloc.decode('ascii')}"
    urls = [challenge_url] if challenge_url else []
    path = url.path.rstrip("/")
    if path:
        urls.append(f"{origin}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{origin}/.well-known/oauth-protected-resource")
    return urls


def server_metadata_urls(issuer: str) -> list[str]:
    """RFC 8414 §3.1 then OIDC Discovery URLs for `issuer`, path-aware (MCP's order)."""
    url = httpx.URL(issuer)
    origin = f"{url.scheme}://{url.netloc.decode('ascii')}"
    path = url.path.rstrip("/")
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server",
                f"{origin}/.well-known/openid-configuration"]
    return [f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration"]


def decode_resource_metadata(body: bytes, url: str) -> ProtectedResourceMetadata:
    """Raises AuthError naming `url` when the document is not RFC 9728 metadata."""
    try:
        meta = msgspec.json.decode(body, type=ProtectedResourceMetadata)
    except msgspec.DecodeError as exc:
        raise AuthError(f"malformed protected resource metadata at {url}: {exc}") from None
    if not meta.authorization_servers:
        raise AuthError(f"protected resource metadata at {url} names no authorization server")
    return meta


def decode_server_metadata(body: bytes, url: str, issuer: str) -> ServerMetadata:
    """Raises AuthError when the document is malformed or names another issuer (RFC 8414 §3.3)."""
    try:
        meta = msgspec.json.decode(body, type=ServerMetadata)
    except msgspec.DecodeError as exc:
        raise AuthError(f"malformed authorization server metadata at {url}: {exc}") from None
    if meta.issuer != issuer:
        raise AuthError(f"authorization server metadata at {url} is for issuer {meta.issuer!r}, "
                        f"not {issuer!r}")
    methods = meta.code_challenge_methods_supported
    if methods is not None and "S256" not in methods:
        raise AuthError(f"the authorization server {issuer} does not support PKCE S256")
    return meta


def resource_for(server_url: str, metadata: ProtectedResourceMetadata | None) -> str:
    """The RFC 8707 `resource` to ask for: the PRM `resource` verbatim when it covers
    `server_url`, else the server URL without its fragment.

    Raises AuthError when the metadata names a resource that does not cover the server
    (RFC 9728 §3.3: such a document must not be used).
    """
    own = server_url.split("#", 1)[0]
    if metadata is None:
        return own
    if not covers(metadata.resource, own):
        raise AuthError(f"protected resource metadata is for {metadata.resource!r}, "
                        f"not for {own!r}")
    return metadata.resource


def covers(resource: str, server_url: str) -> bool:
    """True when `server_url` is `resource` or below it (same scheme, host and port)."""
    try:
        outer, inner = httpx.URL(resource), httpx.URL(server_url)
    except httpx.InvalidURL:
        return False
    if (outer.scheme, outer.netloc) != (inner.scheme, inner.netloc):
        return False
    prefix = outer.path.rstrip("/")
    return inner.path == prefix or inner.path.startswith(prefix + "/") or not prefix
