"""KeySet: an issuer's signing keys, from its JWKS (RFC 7517), cached and refreshed with care."""

# Design: the JWKS location comes from configuration or from the issuer's metadata (RFC 8414,
# then OpenID Connect Discovery), whose `issuer` must equal the configured one. Keys are cached
# for `max_age`; a token naming an unknown `kid` triggers a refresh at most once per
# `min_refresh` seconds (forged kids cannot turn the server into a fetch amplifier), and one
# refresh serves every request waiting for it. When the authorization server is down, cached
# keys keep working; a key never seen raises AuthServerDown (503) rather than a hang.
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

import jwt

from mrtr.auth._fetch import FetchFailed, fetch_json
from mrtr.errors import MrtrError

__all__ = ["AuthServerDown", "KeySet", "UnknownKey", "discover"]

Clock = Callable[[], float]


class UnknownKey(MrtrError):
    """The token names a key the issuer does not publish."""


class AuthServerDown(MrtrError):
    """The issuer's metadata or keys cannot be fetched now."""


class KeySet:
    """The signing keys of one issuer (`jwks_uri`, or discovered from `issuer`).

    `jwks` (a JWK Set document) fixes the keys instead: nothing is ever fetched. Times are in
    seconds: `max_age` before cached keys are fetched again, `min_refresh`
    between two fetches caused by unknown key ids, `timeout` per fetch.
    """

    def __init__(
        self,
        issuer: str,
        *,
        jwks_uri: str | None = None,
        jwks: Mapping[str, object] | None = None,
        max_age: float = 3600.0,
        min_refresh: float = 30.0,
        timeout: float = 5.0,
        max_keys: int = 32,
        clock: Clock = time.time,
        log: logging.Logger | None = None,
    ) -> None:
        self.issuer = issuer
        self.jwks_uri = jwks_uri
        self.max_age = max_age
        self.min_refresh = min_refresh
        self.timeout = timeout
        self.max_keys = max_keys
        self.clock = clock
        self.log = log or logging.getLogger("mrtr.auth")
        self.fetches = 0  # JWKS fetches made (tests, metrics)
        self._jwks: dict[str | None, dict[str, object]] = {}
        self._built: dict[tuple[str | None, str], jwt.PyJWK] = {}
        self._loaded_at: float | None = None
        self._tried_at = float("-inf")
        self._down: str | None = None  # why the last fetch failed, while no keys are cached
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._static = jwks is not None
        if jwks is not None:
            self._jwks = self._parse(jwks, "the configured JWKS")
            self._loaded_at = float("inf")  # never stale

    async def key(self, kid: str | None, alg: str) -> jwt.PyJWK:
        """The verification key for a token header's `kid` and `alg`.

        Raises UnknownKey, or AuthServerDown when the keys cannot be fetched.
        """
        now = self.clock()
        fresh = self._loaded_at is not None and now - self._loaded_at < self.max_age
        if not (fresh and kid in self._jwks):
            await self._refresh(now)
        if kid not in self._jwks:
            raise UnknownKey(f"no key {kid!r}")
        return self._built.get((kid, alg)) or self._build(kid, alg)

    async def _refresh(self, asked_at: float) -> None:
        """Fetch the keys unless done recently. Raises AuthServerDown."""
        if self._static:
            return
        async with self._lock_of(asyncio.get_running_loop()):
            if self._tried_at >= asked_at:
                return  # another request fetched them while this one waited
            if asked_at - self._tried_at < self.min_refresh:
                if self._down is not None:  # failed just now: answer at once, do not hammer
                    raise AuthServerDown(self._down)
                return
            self._tried_at = self.clock()
            try:
                keys = await self._fetch()
            except FetchFailed as exc:
                if self._jwks:
                    self.log.warning("JWKS refresh failed, keeping cached keys: %s", exc)
                    return
                self._down = str(exc)
                raise AuthServerDown(self._down) from None
            self._down = None
            self._jwks = keys
            self._built = {}
            self._loaded_at = self.clock()

    def _lock_of(self, loop: asyncio.AbstractEventLoop) -> asyncio.Lock:
        """One lock per event loop (a lock is bound to the loop it first waited in)."""
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        return self._lock[1]

    async def _fetch(self) -> dict[str | None, dict[str, object]]:
        if self.jwks_uri is None:
            metadata = await discover(self.issuer, timeout=self.timeout)
            uri = metadata.get("jwks_uri")
            if not isinstance(uri, str):
                raise FetchFailed(f"the metadata of {self.issuer} has no jwks_uri")
            self.jwks_uri = uri
        self.fetches += 1
        return self._parse(await fetch_json(self.jwks_uri, timeout=self.timeout), self.jwks_uri)

    def _parse(self, document: Mapping[str, object], where: str
               ) -> dict[str | None, dict[str, object]]:
        listed = document.get("keys")
        if not isinstance(listed, list):
            raise FetchFailed(f"{where}: no keys")
        keys: dict[str | None, dict[str, object]] = {}
        for jwk in listed[: self.max_keys]:
            if isinstance(jwk, dict) and jwk.get("use", "sig") == "sig":
                kid = jwk.get("kid")
                keys[kid if isinstance(kid, str) else None] = jwk
        if len(keys) == 1:  # a token without `kid` may use the only key
            keys.setdefault(None, next(iter(keys.values())))
        return keys

    def _build(self, kid: str | None, alg: str) -> jwt.PyJWK:
        jwk = self._jwks[kid]
        if isinstance(jwk.get("alg"), str) and jwk["alg"] != alg:
            raise UnknownKey(f"key {kid!r} is for {jwk['alg']}, not {alg}")
        try:
            built = jwt.PyJWK(jwk, algorithm=alg)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError) as exc:  # a malformed JWK
            raise UnknownKey(f"key {kid!r} does not fit {alg}: {exc}") from None
        self._built[(kid, alg)] = built
        return built


async def discover(issuer: str, *, timeout: float) -> dict[str, object]:
    """The issuer's authorization server metadata (RFC 8414, else OpenID Connect Discovery).

    Raises FetchFailed when no well-known document answers for exactly this issuer.
    """
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    candidates = [f"{origin}/.well-known/oauth-authorization-server{path}",
                  f"{origin}/.well-known/openid-configuration{path}"]
    if path:
        candidates.append(f"{origin}{path}/.well-known/openid-configuration")
    failures = []
    for url in candidates:
        try:
            metadata = await fetch_json(url, timeout=timeout)
        except FetchFailed as exc:
            failures.append(str(exc))
            continue
        if metadata.get("issuer") == issuer:
            return metadata
        failures.append(f"{url}: issuer {metadata.get('issuer')!r} is not {issuer!r}")
    raise FetchFailed("; ".join(failures))
