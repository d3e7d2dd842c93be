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

from mrtr.auth._dpop import InvalidProof, Proof, ProofChecker, bound_key
from mrtr.auth._keys import AuthServerDown, KeySet
from mrtr.auth._settings import AuthSettings
from mrtr.auth._tokens import (
    ALGORITHMS,
    Introspection,
    InvalidToken,
    JWTVerifier,
    TokenCache,
    TokenVerifier,
)
from mrtr.errors import AuthUnavailable, DPoPRefused, Forbidden, StoreUnavailable, Unauthorized
from mrtr.protocol import CallToolRequest
from mrtr.server import Dispatcher, Peer, Principal

__all__ = ["WELL_KNOWN", "ResourceServer", "metadata_url"]

WELL_KNOWN = "/.well-known/oauth-protected-resource"
_AUTHORIZATION = re.compile(r"^(Bearer|DPoP) +([A-Za-z0-9\-._~+/]+=*) *$", re.IGNORECASE)


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
        self.dpop: ProofChecker | None = None
        self._dpop_checker(clock)
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

    def _dpop_checker(self, clock: Callable[[], float]) -> None:
        settings = self.settings
        self.dpop = None if settings.dpop == "off" else ProofChecker(
            algorithms=ALGORITHMS, window=settings.dpop_window, leeway=settings.leeway,
            nonce=settings.dpop_nonce, clock=clock, log=self.log)

    # -- ProtectedResource (McpApp) ---------------------------------------------------------------
    async def authenticate(self, headers: Mapping[str, str], resource: str, /, *,
                           method: str = "POST", dispatcher: Dispatcher | None = None
                           ) -> Principal:
        """The caller's Principal. Raises Unauthorized (401), Forbidden, AuthUnavailable.

        `method` is the request's (a DPoP proof's `htm`); `dispatcher` lends its store (the
        `jti` replay cache) and key ring (nonces) to DPoP.
        """
        resource = self.settings.resource or resource
        found = _AUTHORIZATION.match(headers.get("authorization", ""))
        scheme = found.group(1).lower() if found is not None else None
        if found is None or (scheme == "dpop" and self.dpop is None):
            raise self._refused(resource, None, "Unauthorized: a bearer token is required"
                                if self.settings.dpop != "require" else
                                "Unauthorized: a DPoP-bound token and proof are required",
                                dispatcher, None)
        token = found.group(2)
        if scheme == "bearer" and self.settings.dpop == "require":
            self.log.info("bearer token refused: DPoP is required (--auth-dpop require)")
            raise self._refused(resource, "invalid_token",
                                "Unauthorized: a DPoP-bound token and proof are required",
                                dispatcher, scheme)
        proof = None
        if scheme == "dpop":
            proof = self._proof(headers, method, resource, token, dispatcher)
        principal = await self._verify(token, resource, dispatcher, scheme)
        jkt = bound_key(principal.claims)
        if proof is None and jkt is not None:
            self.log.info("bearer token refused: it is DPoP-bound (cnf.jkt), it needs a proof")
            raise self._refused(resource, "invalid_token",
                                "Unauthorized: this access token needs a DPoP proof",
                                dispatcher, scheme)
        if proof is not None:
            if jkt != proof.jkt:  # a thumbprint is no secret: a plain comparison
                why = "is not DPoP-bound" if jkt is None else "is bound to another key"
                self.log.info("DPoP token refused: the access token %s", why)
                raise self._refused(resource, "invalid_token",
                                    "Unauthorized: the access token is not bound to this key",
                                    dispatcher, scheme)
            await self._spend(proof, resource, dispatcher)
        if not self.required <= principal.scopes:
            raise Forbidden("Forbidden: insufficient scope", challenge=self.challenge(
                resource, error="insufficient_scope", scopes=self.required | principal.scopes,
                scheme=self._scope_scheme))
        return principal

    async def _verify(self, token: str, resource: str, dispatcher: Dispatcher | None,
                      scheme: str | None) -> Principal:
        verifier = self.jwt if token.count(".") == 2 else self.opaque
        try:
            if verifier is None:
                raise InvalidToken("not a JWT, and no introspection endpoint is configured")
            return await verifier.verify(token, self.audiences(resource))
        except InvalidToken as exc:
            self.log.info("bearer token refused: %s", exc)
            raise self._refused(resource, "invalid_token",
                                "Unauthorized: invalid or expired access token",
                                dispatcher, scheme) from None
        except AuthServerDown as exc:
            self.log.warning("cannot check a bearer token, the issuer is unreachable: %s", exc)
            raise AuthUnavailable("Service Unavailable: the access token cannot be checked now",
                                  challenge="") from None

    def _proof(self, headers: Mapping[str, str], method: str, resource: str, token: str,
               dispatcher: Dispatcher | None) -> Proof:
        assert self.dpop is not None
        try:
            if "dpop" not in headers:
                raise InvalidProof("no DPoP header")
            return self.dpop.check(headers["dpop"], method=method, url=resource,
                                   access_token=token, dispatcher=dispatcher)
        except InvalidProof as exc:
            raise self._bad_proof(exc, resource, dispatcher) from None

    async def _spend(self, proof: Proof, resource: str, dispatcher: Dispatcher | None) -> None:
        assert self.dpop is not None
        try:
            await self.dpop.spend(proof, dispatcher)
        except InvalidProof as exc:
            raise self._bad_proof(exc, resource, dispatcher) from None
        except StoreUnavailable as exc:
            self.log.warning("cannot check a DPoP proof's jti, the store is unavailable: %s", exc)
            raise AuthUnavailable("Service Unavailable: the DPoP proof cannot be checked now",
                                  challenge="") from None

    def _bad_proof(self, exc: InvalidProof, resource: str, dispatcher: Dispatcher | None
                   ) -> Unauthorized:
        self.log.info("DPoP proof refused: %s", exc)
        message = ("Unauthorized: a DPoP nonce is required" if exc.error == "use_dpop_nonce"
                   else "Unauthorized: invalid DPoP proof")
        return self._refused(resource, exc.error, message, dispatcher, "dpop")

    def _refused(self, resource: str, error: str | None, message: str,
                 dispatcher: Dispatcher | None, scheme: str | None) -> Unauthorized:
        """A 401 for credentials of `scheme`: Bearer alone when DPoP is off, else the DPoP
        challenge, and the Bearer one when bearer tokens are accepted too. `error` goes with
        the scheme that failed (RFC 6750 §3.1, RFC 9449 §7.1)."""
        if self.dpop is None:
            return Unauthorized(message, challenge=self.challenge(
                resource, error=error, scopes=self.required))
        dpop_failed = scheme == "dpop" or self.settings.dpop == "require"
        params = [f'error="{error}"'] if error and dpop_failed else []
        params += [f'algs="{" ".join(self.dpop.algorithms)}"',
                   f'resource_metadata="{_quoted(metadata_url(resource))}"']
        dpop = "DPoP " + ", ".join(params)
        if self.settings.dpop == "allow":  # the scheme that failed first: a client reads its error
            bearer = self.challenge(resource, scopes=self.required,
                                    error=None if dpop_failed else error)
            dpop = f"{dpop}, {bearer}" if dpop_failed else f"{bearer}, {dpop}"
        return DPoPRefused(message, challenge=dpop, error=error,
                           nonce=self.dpop.issue_nonce(dispatcher))

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
                                                 error="insufficient_scope", scopes=wanted,
                                                 scheme=self._scope_scheme))

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
        if self.dpop is not None:
            metadata["dpop_signing_alg_values_supported"] = list(self.dpop.algorithms)
            if self.settings.dpop == "require":
                metadata["dpop_bound_access_tokens_required"] = True
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
                  scopes: Iterable[str] = (), scheme: str = "Bearer") -> str:
        """A `WWW-Authenticate: Bearer` value (RFC 6750 §3, RFC 9728 §5.1); the same
        parameters under `scheme` "DPoP" (RFC 9449 §7.1) when DPoP is required."""
        parts = [f'error="{error}"'] if error else []
        wanted = " ".join(sorted(scopes))
        if wanted:
            parts.append(f'scope="{wanted}"')
        if scheme == "DPoP" and self.dpop is not None:
            parts.append(f'algs="{" ".join(self.dpop.algorithms)}"')
        parts.append(f'resource_metadata="{_quoted(metadata_url(resource))}"')
        return f"{scheme} " + ", ".join(parts)

    @property
    def _scope_scheme(self) -> str:
        """The scheme a 403 insufficient_scope challenge names."""
        return "DPoP" if self.settings.dpop == "require" else "Bearer"


def metadata_url(resource: str) -> str:
    """Where the metadata of `resource` lives: the well-known path inserted before its path."""
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
