"""ResourceServer: McpApp's OAuth 2.1 resource server (bearer tokens, RFC 9728 metadata).

401 with `WWW-Authenticate: Bearer resource_metadata=…` for a missing or bad token, 403
`insufficient_scope` naming the scopes to step up to, 503 when the issuer cannot be reached.
It only raises (Unauthorized, Forbidden, AuthUnavailable); the error policy
(mrtr.server._failures) turns each into its HTTP answer, in both eras.
"""

# Design: the token is checked before the body is read; the per-tool scope check runs after the
# message is decoded and before the handler (the Runner checks again, for every transport). The
# client sees frozen messages; why a token failed goes to the "mrtr.auth" log. The principal's
# scopes never enter the requestState binding, so stepping up keeps a flow alive.
from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import msgspec

from mrtr.auth._keys import AuthServerDown, KeySet
from mrtr.auth._settings import AuthSettings
from mrtr.auth._tokens import Introspection, InvalidToken, JWTVerifier, TokenCache, TokenVerifier
from mrtr.errors import AuthUnavailable, Forbidden, Unauthorized
from mrtr.protocol import CallToolRequest
from mrtr.server import Dispatcher, Peer, Principal

__all__ = ["WELL_KNOWN", "ResourceServer", "metadata_url"]

WELL_KNOWN = "/.well-known/oauth-protected-resource"
_BEARER = re.compile(r"^[Bb][Ee][Aa][Rr][Ee][Rr] +([A-Za-z0-9\-._~+/]+=*) *$")


class ResourceServer:
    """Checks bearer tokens for an McpApp: `McpApp(dispatcher, authenticator=ResourceServer(s))`.

    `verifier` replaces the JWT/introspection checks (API keys, another token format): it
    turns a bearer token into a Principal or raises InvalidToken.
    """

    def __init__(
        self,
        settings: AuthSettings,
        *,
        verifier: TokenVerifier | None = None,
        clock: Callable[[], float] = time.time,
        log: logging.Logger | None = None,
    ) -> None:
        self.settings = settings
        self.log = log or logging.getLogger("mrtr.auth")
        self.required = frozenset(settings.scopes)
        self.keys: KeySet | None = None
        self.jwt: TokenVerifier | None = None
        self.opaque: TokenVerifier | None = None
        if verifier is not None:
            self.jwt = self.opaque = self._cached(verifier, clock)
            return
        if settings.issuer is None:
            raise ValueError("AuthSettings need an issuer (or pass a verifier)")
        if settings.introspection_url is not None:
            assert settings.client_id is not None and settings.client_secret is not None
            self.opaque = Introspection(
                settings.introspection_url, client_id=settings.client_id,
                client_secret=settings.client_secret, issuer=settings.issuer,
                timeout=settings.timeout, leeway=settings.leeway, clock=clock)
        self.keys = KeySet(settings.issuer, jwks_uri=settings.jwks_uri,
                           max_age=settings.jwks_max_age, min_refresh=settings.jwks_min_refresh,
                           timeout=settings.timeout, clock=clock, log=self.log)
        self.jwt = self._cached(
            JWTVerifier(settings.issuer, self.keys, leeway=settings.leeway, clock=clock,
                        require_at_jwt=settings.require_at_jwt), clock)
        if self.opaque is not None:
            self.opaque = self._cached(self.opaque, clock)

    # -- ProtectedResource (McpApp) ---------------------------------------------------------------
    async def authenticate(self, headers: Mapping[str, str], resource: str, /) -> Principal:
        """The caller's Principal. Raises Unauthorized (401), Forbidden, AuthUnavailable."""
        resource = self.settings.resource or resource
        found = _BEARER.match(headers.get("authorization", ""))
        if found is None:
            raise Unauthorized("Unauthorized: a bearer token is required",
                               challenge=self.challenge(resource, scopes=self.required))
        token = found.group(1)
        verifier = self.jwt if token.count(".") == 2 else self.opaque
        try:
            if verifier is None:
                raise InvalidToken("not a JWT, and no introspection endpoint is configured")
            principal = await verifier.verify(token, self.audiences(resource))
        except InvalidToken as exc:
            self.log.info("bearer token refused: %s", exc)
            raise Unauthorized("Unauthorized: invalid or expired access token",
                               challenge=self.challenge(resource, error="invalid_token",
                                                        scopes=self.required)) from None
        except AuthServerDown as exc:
            self.log.warning("cannot check a bearer token, the issuer is unreachable: %s", exc)
            raise AuthUnavailable("Service Unavailable: the access token cannot be checked now",
                                  challenge="") from None
        if not self.required <= principal.scopes:
            raise Forbidden("Forbidden: insufficient scope", challenge=self.challenge(
                resource, error="insufficient_scope", scopes=self.required | principal.scopes))
        return principal

    def authorize(self, dispatcher: Dispatcher, message: Any, peer: Peer, resource: str,
                  /) -> None:
        """Raises Forbidden when `message` calls a tool whose `scopes=` the peer lacks."""
        if not isinstance(message, CallToolRequest):
            return
        entry = dispatcher.server.tables.tools.get(message.params.name)
        if entry is None or not entry.scopes or peer.allows(entry.scopes):
            return
        wanted = self.required | entry.scopes | (peer.scopes or frozenset())
        raise Forbidden("Forbidden: insufficient scope", scopes=sorted(entry.scopes),
                        challenge=self.challenge(self.settings.resource or resource,
                                                 error="insufficient_scope", scopes=wanted))

    def document(self, dispatcher: Dispatcher, path: str, resource: str, /) -> bytes | None:
        """The RFC 9728 metadata when `path` is its well-known path (root or path-suffixed)."""
        served = (WELL_KNOWN, urlsplit(metadata_url(resource)).path)
        resource = self.settings.resource or resource
        if path not in served and path != urlsplit(metadata_url(resource)).path:
            return None
        tool_scopes = (e.scopes for e in dispatcher.server.tables.tools.values())
        metadata: dict[str, object] = {
            "resource": resource,
            "authorization_servers": [self.settings.issuer] if self.settings.issuer else [],
            "scopes_supported": sorted(self.required.union(*tool_scopes)),
            "bearer_methods_supported": ["header"],
        }
        if self.settings.resource_name:
            metadata["resource_name"] = self.settings.resource_name
        return msgspec.json.encode(metadata)

    # -- helpers ----------------------------------------------------------------------------------
    def _cached(self, verifier: TokenVerifier, clock: Callable[[], float]) -> TokenVerifier:
        seconds = self.settings.token_cache
        return TokenCache(verifier, seconds=seconds, clock=clock) if seconds else verifier

    def audiences(self, resource: str) -> Sequence[str]:
        return self.settings.audience or (resource,)

    def challenge(self, resource: str, *, error: str | None = None,
                  scopes: Iterable[str] = ()) -> str:
        """A `WWW-Authenticate: Bearer` value (RFC 6750 §3, RFC 9728 §5.1)."""
        parts = [f'error="{error}"'] if error else []
        wanted = " ".join(sorted(scopes))
        if wanted:
            parts.append(f'scope="{wanted}"')
        parts.append(f'resource_metadata="{_quoted(metadata_url(resource))}"')
        return "Bearer " + ", ".join(parts)


def metadata_url(resource: str) -> str:
    """Where the metadata of `resource` lives: the well-known path inserted before its path."""
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
