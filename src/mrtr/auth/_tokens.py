"""Access-token verifiers: JWTs checked against the issuer's keys, opaque tokens by RFC 7662."""

# Design: PyJWT checks signature, `iss` and `aud`; `exp`/`nbf` are checked here against the
# injected clock (PyJWT reads the wall clock), with `leeway` seconds of skew. Only asymmetric
# algorithms are accepted: "none" and HMAC (whose key would be public) never are. The JOSE `typ`
# must say "access token" (RFC 9068 §4), so an ID token or another JWT the issuer signed for the
# same audience is refused before any key is fetched. A token's principal is (iss, sub,
# client_id or azp); its scopes come from `scope` (RFC 9068) or `scp`.
from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import jwt
import msgspec

from mrtr.auth._fetch import FetchFailed, fetch_json
from mrtr.auth._keys import AuthServerDown, KeySet, UnknownKey
from mrtr.errors import MrtrError
from mrtr.server import Principal

__all__ = ["ALGORITHMS", "Introspection", "InvalidToken", "JWTVerifier", "TokenCache",
           "TokenVerifier", "principal_of"]

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
              "EdDSA")
_ACCESS_TOKEN_TYPES = frozenset({"at+jwt", "application/at+jwt"})  # RFC 9068 §2.1, any case
_OPTIONS = {"require": ["exp", "iss", "aud", "sub"], "verify_exp": False, "verify_nbf": False,
            "verify_iat": False}


class InvalidToken(MrtrError):
    """The access token is not acceptable; the message is for the server log only."""


class TokenVerifier(Protocol):
    """Turns a bearer token into a Principal for one of `audiences`.

    Raises InvalidToken (401), or AuthServerDown when it cannot decide now (503).
    """

    async def verify(self, token: str, audiences: Sequence[str], /) -> Principal: ...


class JWTVerifier:
    """Verifies JWT access tokens (RFC 9068) signed by `issuer` with a key from `keys`.

    The header's `typ` must be `at+jwt` or `application/at+jwt` (any case): other JWTs the
    issuer signs, such as ID tokens (`typ` JWT), are refused. `require_at_jwt=False` accepts
    any `typ`, or none, for issuers that do not follow RFC 9068 there.
    """

    def __init__(
        self,
        issuer: str,
        keys: KeySet,
        *,
        algorithms: Sequence[str] = ALGORITHMS,
        leeway: float = 30.0,
        clock: Callable[[], float] = time.time,
        require_at_jwt: bool = True,
    ) -> None:
        bad = [a for a in algorithms if a not in ALGORITHMS]
        if bad:
            raise ValueError(f"algorithms must be asymmetric ({', '.join(ALGORITHMS)}): {bad}")
        self.issuer = issuer
        self.keys = keys
        self.algorithms = frozenset(algorithms)
        self.leeway = leeway
        self.clock = clock
        self.require_at_jwt = require_at_jwt

    async def verify(self, token: str, audiences: Sequence[str], /) -> Principal:
        header = _header(token)
        typ = header.get("typ")
        if self.require_at_jwt and not (isinstance(typ, str)
                                        and typ.lower() in _ACCESS_TOKEN_TYPES):
            raise InvalidToken(f"typ {typ!r} is not at+jwt: not an access token (RFC 9068 "
                               "§4; AuthSettings(require_at_jwt=False) accepts it)")
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise InvalidToken(f"algorithm {alg!r} is not accepted")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("kid is not a string")
        try:
            key = await self.keys.key(kid, alg)
        except UnknownKey as exc:
            raise InvalidToken(str(exc)) from None
        try:
            claims = jwt.decode(token, key, algorithms=[alg], audience=list(audiences),
                                issuer=self.issuer, options=_OPTIONS)  # type: ignore[arg-type]
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise InvalidToken(f"{type(exc).__name__}: {exc}") from None
        check_times(claims, self.clock(), self.leeway)
        return principal_of(claims)


class Introspection:
    """Verifies opaque tokens at an RFC 7662 introspection `endpoint`.

    The resource server authenticates with HTTP Basic (`client_id`, `client_secret`). An
    active token must name one of the audiences, and its `iss` must equal `issuer`: an
    endpoint that also answers for tokens of another authorization server (a shared gateway,
    a federated issuer) cannot make them ours. An answer without `iss` (it is optional in
    RFC 7662 §2.2) is taken as the configured issuer's: the endpoint is the one configured
    beside it, and it vouches for the token.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        client_id: str,
        client_secret: str,
        issuer: str,
        timeout: float = 5.0,
        leeway: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint = endpoint
        self.credentials = (client_id, client_secret)
        self.issuer = issuer
        self.timeout = timeout
        self.leeway = leeway
        self.clock = clock

    async def verify(self, token: str, audiences: Sequence[str], /) -> Principal:
        try:
            answer = await fetch_json(self.endpoint, timeout=self.timeout, auth=self.credentials,
                                      form={"token": token, "token_type_hint": "access_token"})
        except FetchFailed as exc:
            raise AuthServerDown(str(exc)) from None
        if answer.get("active") is not True:
            raise InvalidToken("introspection: inactive")
        claims = {"iss": self.issuer, **answer}
        if claims["iss"] != self.issuer:
            raise InvalidToken(f"introspection: issuer {claims['iss']!r}")
        aud = claims.get("aud")
        named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not set(audiences) & set(named):
            raise InvalidToken(f"introspection: audience {aud!r}")
        check_times(claims, self.clock(), self.leeway)
        return principal_of(claims)


class TokenCache:
    """Remembers tokens `inner` accepted, for `seconds` at most and never past their `exp`.

    Trades freshness for speed: a key withdrawn or a token revoked at the issuer is still
    accepted until its entry ends. Refused tokens are not remembered. `size` bounds the entries.
    """

    def __init__(self, inner: TokenVerifier, *, seconds: float, size: int = 4096,
                 clock: Callable[[], float] = time.time) -> None:
        self.inner = inner
        self.seconds = seconds
        self.size = size
        self.clock = clock
        self._seen: dict[tuple[str, tuple[str, ...]], tuple[Principal, float]] = {}

    async def verify(self, token: str, audiences: Sequence[str], /) -> Principal:
        key = (token, tuple(audiences))
        now = self.clock()
        hit = self._seen.get(key)
        if hit is not None and now < hit[1]:
            return hit[0]
        principal = await self.inner.verify(token, audiences)
        until = now + self.seconds
        exp = principal.claims.get("exp")
        if isinstance(exp, int | float) and not isinstance(exp, bool):
            until = min(until, exp)
        self._seen.pop(key, None)
        if len(self._seen) >= self.size:
            del self._seen[next(iter(self._seen))]  # the oldest entry
        self._seen[key] = (principal, until)
        return principal


def _header(token: str) -> dict[str, object]:
    """The JOSE header, read only to pick the key: PyJWT then checks the whole token strictly.

    (Cheaper than jwt.get_unverified_header, which would parse the whole token twice.)
    """
    head = token.partition(".")[0]
    try:
        value = msgspec.json.decode(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, msgspec.DecodeError):
        raise InvalidToken("not a JWS: bad header") from None
    if not isinstance(value, dict):
        raise InvalidToken("not a JWS: the header is not an object")
    return value


def check_times(claims: Mapping[str, object], now: float, leeway: float) -> None:
    """Raises InvalidToken unless `nbf - leeway <= now < exp + leeway`."""
    exp, nbf = claims.get("exp"), claims.get("nbf")
    if exp is not None:
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            raise InvalidToken("exp is not a number")
        if now >= exp + leeway:
            raise InvalidToken("expired")
    if nbf is not None:
        if not isinstance(nbf, int | float) or isinstance(nbf, bool):
            raise InvalidToken("nbf is not a number")
        if now < nbf - leeway:
            raise InvalidToken("not valid yet")


def principal_of(claims: Mapping[str, object]) -> Principal:
    """The Principal named by verified claims: (iss, sub, client_id or azp) and its scopes."""
    iss, sub = claims.get("iss"), claims.get("sub")
    if not isinstance(iss, str) or not isinstance(sub, str) or not sub:
        raise InvalidToken("iss or sub missing")
    client = claims.get("client_id", claims.get("azp"))
    scope = claims.get("scope", claims.get("scp", ""))
    scopes = scope.split() if isinstance(scope, str) else scope if isinstance(scope, list) else []
    return Principal(iss, sub, client if isinstance(client, str) else None,
                     scopes=[s for s in scopes if isinstance(s, str)], claims=claims)
