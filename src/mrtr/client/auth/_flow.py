"""The OAuth client flow as a sans-I/O generator: discover, register, authorize, refresh."""

# Design: `AuthFlow.run(request)` yields Steps and is driven by `OAuth` (httpx) or by a test by
# hand, in the style of httpx's auth_flow. A 401 always starts from discovery again, because
# the server may have moved to another authorization server (SEP-2352): a registration bound
# to another issuer is dropped, never presented there. A 403 `insufficient_scope` re-authorizes
# with the union of the scopes held and asked; `max_step_ups` consecutive step-ups without a
# success end in AuthError, so a server that never accepts cannot loop us forever.
from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlencode

import httpx
import msgspec

from mrtr.client.auth._dpop import DPoP, nonce_challenge
from mrtr.client.auth._metadata import (
    AuthError,
    Challenge,
    ProtectedResourceMetadata,
    ServerMetadata,
    covers,
    decode_resource_metadata,
    decode_server_metadata,
    parse_challenge,
    resource_for,
    resource_metadata_urls,
    server_metadata_urls,
)
from mrtr.client.auth._pkce import new_pkce, new_state
from mrtr.client.auth._requests import (
    ClientAssertion,
    decode_registration,
    decode_tokens,
    metadata_request,
    registration_request,
    token_request,
)
from mrtr.client.auth._storage import ClientInfo, Tokens, TokenStorage

__all__ = ["AuthFlow", "Authorize", "AuthStep", "Callback", "HTTPSend", "OAuthSettings",
           "RedirectUri"]


@dataclass(frozen=True)
class HTTPSend:
    """Send the MCP request itself; answered with its httpx.Response (body unread)."""

    request: httpx.Request


@dataclass(frozen=True)
class RedirectUri:
    """Answered with the redirect URI to register and authorize with (a str)."""


@dataclass(frozen=True)
class Authorize:
    """Send the user to `url`; answered with the Callback the redirect brought back."""

    url: str


@dataclass(frozen=True)
class Callback:
    """The query of the redirect back to the client (RFC 6749 §4.1.2, RFC 9207)."""

    code: str | None = None
    state: str | None = None
    iss: str | None = None
    error: str | None = None
    error_description: str | None = None


AuthStep = HTTPSend | httpx.Request | RedirectUri | Authorize
Grant = Literal["authorization_code", "client_credentials"]


@dataclass(frozen=True, kw_only=True)
class OAuthSettings:
    """How the client presents itself; `scopes` overrides the scope selection when set."""

    client_name: str = "mrtr"
    client_metadata_url: str | None = None  # a client ID metadata document (HTTPS URL)
    scopes: tuple[str, ...] | None = None
    max_step_ups: int = 2
    max_metadata_bytes: int = 1 << 20
    timeout: float = 30.0  # seconds, for each metadata, registration and token request


_Gen = Generator[AuthStep, object, Tokens]


class AuthFlow:
    """The state one OAuth client keeps across requests (metadata, step-up count)."""

    def __init__(self, *, storage: TokenStorage, grant: Grant, settings: OAuthSettings,
                 assertion: ClientAssertion | None, clock: Callable[[], float],
                 dpop: DPoP | None = None) -> None:
        self.storage, self.grant, self.settings = storage, grant, settings
        self.assertion, self.clock, self.dpop = assertion, clock, dpop
        self.step_ups = 0
        self._server: ServerMetadata | None = None
        self._version: str | None = None

    def run(self, request: httpx.Request) -> Generator[AuthStep, object, None]:
        """Send `request` with a valid token, authorizing when the server asks for it."""
        self._version = request.headers.get("mcp-protocol-version") or self._version
        server_url = str(request.url.copy_with(query=None, fragment=None))
        tokens = yield from self._stored(server_url)
        fresh_grants = nonces = 0
        while True:
            if tokens is not None:
                self._present(request, tokens)
            response = yield HTTPSend(request)
            assert isinstance(response, httpx.Response)
            challenge = parse_challenge(response)
            if self._new_nonce(response, challenge.error) and nonces < 2:
                nonces += 1  # RFC 9449 §9: the same request again, with the server's nonce
                continue
            if response.status_code == 401 and challenge.oauth:
                if fresh_grants >= 2:
                    raise AuthError(f"{server_url} refused the access token it was just given")
                fresh_grants += 1
                tokens = yield from self._recover(server_url, challenge, tokens,
                                                  refresh=fresh_grants == 1)
            elif response.status_code == 403 and challenge.error == "insufficient_scope":
                if self.step_ups >= self.settings.max_step_ups:
                    raise AuthError(f"{server_url} still needs scope {challenge.scope!r} after "
                                    f"{self.step_ups} step-up authorizations")
                self.step_ups += 1
                held = (tokens.scope if tokens is not None else None) or ""
                wanted = _union(held, challenge.scope or "")
                tokens = yield from self._authorize(server_url, challenge, wanted or None)
            else:
                if response.status_code < 400:
                    self.step_ups = 0
                return

    def _recover(self, server_url: str, challenge: Challenge, tokens: Tokens | None, *,
                 refresh: bool) -> _Gen:
        """After a 401: a refreshed token if the refresh token still works, else a new grant."""
        if refresh and tokens is not None and tokens.refresh_token:
            refreshed = yield from self._refresh(tokens)
            if refreshed is not None:
                return refreshed
        return (yield from self._authorize(server_url, challenge, None))

    def _stored(self, server_url: str) -> Generator[AuthStep, object, Tokens | None]:
        """The stored tokens if they are for `server_url`, refreshed when about to expire."""
        tokens = self.storage.load_tokens()
        if tokens is None or (tokens.resource and not covers(tokens.resource, server_url)):
            return None  # a token for another server is never shown to this one
        if not tokens.fresh(self.clock()):
            return (yield from self._refresh(tokens))
        return tokens

    def _present(self, request: httpx.Request, tokens: Tokens) -> None:
        if self.dpop is not None and tokens.token_type.lower() == "dpop":
            request.headers["Authorization"] = f"DPoP {tokens.access_token}"
            self.dpop.sign(request, tokens.access_token)
        else:
            request.headers["Authorization"] = f"Bearer {tokens.access_token}"

    def _new_nonce(self, response: httpx.Response, error: str | None) -> bool:
        """Keep a DPoP nonce the response carries; True when it asks for a retry with it."""
        if self.dpop is None:
            return False
        return self.dpop.remember(response) and nonce_challenge(response, error)

    def _token(self, server: ServerMetadata, client: ClientInfo, form: dict[str, str]
               ) -> Generator[AuthStep, object, httpx.Response]:
        """POST to the token endpoint (with a DPoP proof, again once with a nonce, §8)."""
        for attempt in (1, 2):
            request = token_request(server, client, form, assertion=self.assertion)
            if self.dpop is not None:
                self.dpop.sign(request)
            answer = yield request
            assert isinstance(answer, httpx.Response)
            error = "use_dpop_nonce" if b"use_dpop_nonce" in answer.content else None
            if attempt == 2 or not (answer.status_code == 400 and self._new_nonce(answer, error)):
                return answer
        raise AssertionError("unreachable")

    def _authorize(self, server_url: str, challenge: Challenge, scope: str | None) -> _Gen:
        prm = yield from self._discover_resource(server_url, challenge)
        resource = resource_for(server_url, prm)
        issuer = prm.authorization_servers[0] if prm else _origin(server_url)
        server = yield from self._discover_server(issuer)
        client = self._client_for(server.issuer)
        if scope is None:
            scope = self._select_scope(challenge, prm, server)
        if client is None:
            client = yield from self._register(server, scope)
        reply: object
        if self.grant == "client_credentials":
            form = {"grant_type": "client_credentials", "resource": resource}
            form.update({"scope": scope} if scope else {})
            reply = yield from self._token(server, client, form)
        else:
            reply = yield from self._code_grant(server, client, scope, resource)
        assert isinstance(reply, httpx.Response)
        tokens = decode_tokens(reply, issuer=server.issuer, resource=resource, now=self.clock())
        if scope and tokens.scope is None:
            tokens = _with_scope(tokens, scope)
        self.storage.save_tokens(tokens)
        return tokens

    def _code_grant(self, server: ServerMetadata, client: ClientInfo, scope: str | None,
                    resource: str) -> Generator[AuthStep, object, object]:
        if not server.authorization_endpoint:
            raise AuthError(f"the authorization server {server.issuer} has no "
                            "authorization_endpoint")
        redirect_uri = yield RedirectUri()
        assert isinstance(redirect_uri, str)
        pkce, state = new_pkce(), new_state()
        query = {"response_type": "code", "client_id": client.client_id,
                 "redirect_uri": redirect_uri, "state": state,
                 "code_challenge": pkce.challenge, "code_challenge_method": "S256",
                 "resource": resource}
        if scope:
            query["scope"] = scope
            if "offline_access" in scope.split():
                query["prompt"] = "consent"  # OIDC Core §11
        separator = "&" if "?" in server.authorization_endpoint else "?"
        callback = yield Authorize(server.authorization_endpoint + separator + urlencode(query))
        assert isinstance(callback, Callback)
        code = check_callback(callback, state, server)
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
                "code_verifier": pkce.verifier, "resource": resource}
        reply = yield from self._token(server, client, form)
        return reply

    def _refresh(self, tokens: Tokens) -> Generator[AuthStep, object, Tokens | None]:
        if not tokens.refresh_token or not tokens.issuer:
            return None
        try:
            server = yield from self._discover_server(tokens.issuer)
            client = self._client_for(server.issuer)
            if client is None:
                return None
            form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
            form.update({"resource": tokens.resource} if tokens.resource else {})
            reply = yield from self._token(server, client, form)
            new = decode_tokens(reply, issuer=server.issuer, resource=tokens.resource,
                                now=self.clock(), keep_refresh=tokens.refresh_token)
        except AuthError:
            self.storage.save_tokens(None)  # a refused refresh token: authorize from scratch
            return None
        if new.scope is None and tokens.scope:
            new = _with_scope(new, tokens.scope)
        self.storage.save_tokens(new)
        return new

    def _discover_resource(self, server_url: str, challenge: Challenge
                           ) -> Generator[AuthStep, object, ProtectedResourceMetadata | None]:
        for url in resource_metadata_urls(challenge.resource_metadata, server_url):
            reply = yield metadata_request(url, self._version)
            assert isinstance(reply, httpx.Response)
            if reply.status_code == 200:
                return decode_resource_metadata(self._body(reply, url), url)
        return None  # a 2025-03-26 server: its origin is the authorization server

    def _discover_server(self, issuer: str) -> Generator[AuthStep, object, ServerMetadata]:
        if self._server is not None and self._server.issuer == issuer:
            return self._server
        tried: list[str] = []
        for url in server_metadata_urls(issuer):
            reply = yield metadata_request(url, self._version)
            assert isinstance(reply, httpx.Response)
            tried.append(f"{url} (HTTP {reply.status_code})")
            if reply.status_code == 200:
                self._server = decode_server_metadata(self._body(reply, url), url, issuer)
                return self._server
            if not 400 <= reply.status_code < 500:
                break
        raise AuthError(f"no authorization server metadata for {issuer}: tried "
                        + ", ".join(tried))

    def _client_for(self, issuer: str) -> ClientInfo | None:
        """The stored registration if it is valid at `issuer`; drops one bound elsewhere."""
        client = self.storage.load_client()
        if client is not None and client.issuer not in (None, issuer):
            self.storage.save_client(None)
            self.storage.save_tokens(None)
            return None
        return client

    def _register(self, server: ServerMetadata, scope: str | None
                  ) -> Generator[AuthStep, object, ClientInfo]:
        url = self.settings.client_metadata_url
        if url and server.client_id_metadata_document_supported:
            client = ClientInfo(client_id=url, token_endpoint_auth_method="none")
            self.storage.save_client(client)
            return client
        if self.grant == "client_credentials":
            raise AuthError("the client credentials grant needs a pre-registered client id")
        redirect_uri = yield RedirectUri()
        method = _auth_method(server)
        metadata: dict[str, object] = {
            "client_name": self.settings.client_name, "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"], "token_endpoint_auth_method": method,
            "application_type": "native",
        }
        metadata.update({"scope": scope} if scope else {})
        reply = yield registration_request(server, metadata)
        assert isinstance(reply, httpx.Response)
        client = decode_registration(reply, method, server.issuer)
        self.storage.save_client(client)
        return client

    def _select_scope(self, challenge: Challenge, prm: ProtectedResourceMetadata | None,
                      server: ServerMetadata) -> str | None:
        """MCP scope selection: the challenge's, else the PRM's `scopes_supported`, else none;
        plus `offline_access` when the authorization server offers it (SEP-2207)."""
        if self.settings.scopes is not None:
            scope = " ".join(self.settings.scopes)
        elif challenge.scope:
            scope = challenge.scope
        elif prm is not None and prm.scopes_supported:
            scope = " ".join(prm.scopes_supported)
        else:
            return None
        offered = server.scopes_supported or []
        if self.grant == "authorization_code" and "offline_access" in offered:
            scope = _union(scope, "offline_access")
        return scope or None

    def _body(self, reply: httpx.Response, url: str) -> bytes:
        if len(reply.content) > self.settings.max_metadata_bytes:
            raise AuthError(f"the metadata at {url} exceeds {self.settings.max_metadata_bytes} "
                            "bytes")
        return reply.content


def check_callback(callback: Callback, state: str, server: ServerMetadata) -> str:
    """The authorization code; raises AuthError for an error, a wrong `state` or `iss`.

    RFC 9207: a present `iss` must equal the issuer exactly, and it must be present when the
    server advertises `authorization_response_iss_parameter_supported`.
    """
    if callback.error:
        detail = f" ({callback.error_description})" if callback.error_description else ""
        raise AuthError(f"authorization refused: {callback.error}{detail}")
    if callback.state != state:
        raise AuthError("the authorization response carries another state (not ours)")
    if callback.iss is not None and callback.iss != server.issuer:
        raise AuthError(f"the authorization response comes from issuer {callback.iss!r}, "
                        f"not {server.issuer!r}")
    if callback.iss is None and server.authorization_response_iss_parameter_supported:
        raise AuthError("the authorization response lacks the iss parameter its server "
                        "advertises (RFC 9207)")
    if not callback.code:
        raise AuthError("the authorization response carries no code")
    return callback.code


def _auth_method(server: ServerMetadata) -> str:
    offered = server.token_endpoint_auth_methods_supported
    if offered is None:
        return "client_secret_basic"  # RFC 8414 §2 default
    for method in ("none", "client_secret_basic", "client_secret_post"):
        if method in offered:
            return method
    return offered[0] if offered else "none"


def _union(first: str, second: str) -> str:
    seen: dict[str, None] = dict.fromkeys(first.split())
    seen.update(dict.fromkeys(second.split()))
    return " ".join(seen)


def _with_scope(tokens: Tokens, scope: str) -> Tokens:
    return msgspec.structs.replace(tokens, scope=scope)


def _origin(url: str) -> str:
    parsed = httpx.URL(url)
    return f"{parsed.scheme}://{parsed.netloc.decode('ascii')}"
