"""AuthSettings: how a resource server checks tokens, from code, the environment or the CLI."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from urllib.parse import urlsplit

import msgspec

from mrtr.protocol._loopback import is_loopback

__all__ = ["ENV", "AuthSettings"]

ENV = {  # environment variable -> field; lists are separated by spaces or commas
    "MRTR_AUTH_ISSUER": "issuer",
    "MRTR_AUTH_AUDIENCE": "audience",
    "MRTR_AUTH_SCOPES": "scopes",
    "MRTR_AUTH_RESOURCE": "resource",
    "MRTR_AUTH_JWKS_URI": "jwks_uri",
    "MRTR_AUTH_INTROSPECTION_URL": "introspection_url",
    "MRTR_AUTH_CLIENT_ID": "client_id",
    "MRTR_AUTH_CLIENT_SECRET": "client_secret",
    "MRTR_AUTH_REQUIRE_AT_JWT": "require_at_jwt",  # 0/false/no/off: accept any JOSE typ
    "MRTR_AUTH_DPOP": "dpop",  # off, allow or require (RFC 9449)
    "MRTR_AUTH_DPOP_NONCE": "dpop_nonce",  # 1/true/yes/on: proofs must carry a server nonce
}
DPOP_MODES = ("off", "allow", "require")
_LISTS = ("audience", "scopes")
_BOOLEANS = {"1": True, "true": True, "yes": True, "on": True,
             "0": False, "false": False, "no": False, "off": False}
_SCOPE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")  # RFC 6749 scope-token (NQCHAR)


@dataclass(frozen=True, kw_only=True)
class AuthSettings:
    """The authorization server a resource server trusts, and what its tokens must say.

    `resource` is the public URL of the MCP endpoint (RFC 9728): what the metadata publishes
    and, unless `audience` lists others, the one audience a token must name. Unset, it is
    derived from the server's own configuration, never from a request's Host or X-Forwarded-*
    headers: `mrtr serve` uses `http://`, its bind address and port, and `--path`; an McpApp
    built by hand uses `http://`, the address its ASGI server is bound to, and its path. Behind
    a proxy, or with TLS, set it. `scopes` are needed on every request. `jwks_uri`
    defaults to the one in the issuer's metadata. `introspection_url` (RFC 7662, with
    `client_id`/`client_secret`) checks tokens that are not JWTs. `token_cache` > 0 remembers
    accepted tokens that long (never past `exp`) instead of checking each request; in seconds,
    as are the other times. `require_at_jwt=False` accepts JWTs whose JOSE `typ` is not
    `at+jwt` (RFC 9068 §4), for issuers that omit it or send `JWT`: an ID token the issuer
    signed for this audience is then accepted too.
    `dpop` (RFC 9449): "off" accepts bearer tokens only, "allow" DPoP-bound tokens with a
    proof as well, "require" only those; a token bound to a key (`cnf.jkt`) is never accepted
    as a bearer token. A proof's `iat` may be `dpop_window` seconds old (and `leeway` ahead);
    its `jti` is single-use through the Dispatcher's store. `dpop_nonce` makes every proof
    carry a nonce this server issued (`use_dpop_nonce`), valid `dpop_window` seconds.
    Raises ValueError for a URL that is not https (http only on a loopback host).
    """

    issuer: str | None = None
    audience: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    resource: str | None = None
    jwks_uri: str | None = None
    introspection_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    leeway: float = 30.0
    timeout: float = 5.0
    jwks_max_age: float = 3600.0
    jwks_min_refresh: float = 30.0
    resource_name: str | None = None
    token_cache: float = 0.0
    require_at_jwt: bool = True
    dpop: str = "off"
    dpop_nonce: bool = False
    dpop_window: float = 300.0

    def __post_init__(self) -> None:
        for name in ("issuer", "resource", "jwks_uri", "introspection_url"):
            url = getattr(self, name)
            if url is not None:
                _check_url(name, url)
        for scope in self.scopes:
            if not _SCOPE.match(scope):
                raise ValueError(f"scope {scope!r} is not an RFC 6749 scope token")
        if self.introspection_url and not (self.client_id and self.client_secret):
            raise ValueError("introspection_url needs client_id and client_secret")
        if self.introspection_url and not self.issuer:
            raise ValueError("introspection_url needs issuer")
        if not 0 <= self.token_cache <= 3600:
            raise ValueError(f"token_cache must be 0..3600 seconds, got {self.token_cache}")
        self._check_dpop()
        if not 0 < self.timeout <= 60:
            raise ValueError(f"timeout must be 0..60 seconds, got {self.timeout}")

    def _check_dpop(self) -> None:
        if self.dpop not in DPOP_MODES:
            raise ValueError(f"dpop must be one of {', '.join(DPOP_MODES)}, got {self.dpop!r}")
        if self.dpop_nonce and self.dpop == "off":
            raise ValueError("dpop_nonce needs dpop='allow' or 'require'")
        if not 0 < self.dpop_window <= 3600:
            raise ValueError(f"dpop_window must be 0..3600 seconds, got {self.dpop_window}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **overrides: object) -> AuthSettings | None:
        """Settings from MRTR_AUTH_* variables, then `overrides` that are not None.

        None when neither names an issuer nor an introspection URL (auth off).
        """
        values: dict[str, object] = {}
        for var, name in ENV.items():
            if environ.get(var):
                values[name] = _parse(var, name, environ[var])
        values.update({k: v for k, v in overrides.items() if v is not None and v != ()})
        if not values.get("issuer") and not values.get("introspection_url"):
            return None
        return cls(**values)  # type: ignore[arg-type]

    def to_json(self) -> str:
        """For worker processes (`from_json` reads it back)."""
        return msgspec.json.encode(asdict(self)).decode()

    @classmethod
    def from_json(cls, text: str) -> AuthSettings:
        values = msgspec.json.decode(text)
        return cls(**{k: tuple(v) if k in _LISTS else v  # type: ignore[arg-type]
                      for k, v in values.items()})


def _parse(var: str, name: str, text: str) -> object:
    if name in _LISTS:
        return tuple(text.replace(",", " ").split())
    if name in ("require_at_jwt", "dpop_nonce"):
        if text.strip().lower() not in _BOOLEANS:
            raise ValueError(f"{var} must be 1 or 0 (true/false, yes/no, on/off), got {text!r}")
        return _BOOLEANS[text.strip().lower()]
    return text


def _check_url(name: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return
    raise ValueError(f"{name} must be an https URL (http only on a loopback host), got {url!r}")


