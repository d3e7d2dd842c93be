"""AuthServer: a small real OAuth 2.1 authorization server on 127.0.0.1, for tests.

RFC 8414 metadata, a JWKS whose keys rotate on demand, a token endpoint (client_credentials,
authorization_code with PKCE S256, refresh_token; RFC 8707 `resource` becomes `aud`; a DPoP
proof binds the token to its key, RFC 9449 `cnf.jkt`), RFC 7662
introspection of opaque tokens, RFC 7591 registration. Tokens are ES256 JWTs signed by PyJWT.
Reusable by any end-to-end test: `with AuthServer() as auth: token = auth.mint(...)`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any
from urllib.parse import parse_qs, urlencode

import jwt
import msgspec
from cryptography.hazmat.primitives.asymmetric import ec

from tests.transports.conftest import LiveServer

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """RFC 7638 (SHA-256, base64url), written apart from mrtr.auth: both agree, or one is wrong."""
    required = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"),
                "OKP": ("crv", "kty", "x")}[jwk["kty"]]
    canonical = json.dumps({k: jwk[k] for k in required}, separators=(",", ":"), sort_keys=True)
    digest = hashlib.sha256(canonical.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class AuthServer:
    """Serves an issuer at `issuer` (http://127.0.0.1:PORT) until the `with` block ends.

    `jwks_mode`: "ok", "down" (503) or "hang" (answers after 60 s). `jwks_hits` counts
    JWKS fetches. `clients` maps confidential client ids to secrets.
    """

    def __init__(self, *, user: str = "alice", path: str = "") -> None:
        self.user = user  # the subject /authorize approves
        self.path = path  # an issuer with a path: http://127.0.0.1:PORT/tenant
        self.keys: list[tuple[str, ec.EllipticCurvePrivateKey]] = []
        self.rotate()
        self.jwks_mode = "ok"
        self.jwks_hits = 0
        self.clients: dict[str, str | None] = {"service": "service-secret", "mcp-rs": "rs-secret"}
        self.opaque: dict[str, dict[str, object]] = {}
        self.codes: dict[str, dict[str, str]] = {}
        self.refresh: dict[str, dict[str, str]] = {}
        self.issuer = ""
        self._server: LiveServer | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> AuthServer:
        live = LiveServer(self.app, lifespan="off", http="h11", interface="asgi3")
        self._server = live.__enter__()
        self.issuer = f"{self._server.url}{self.path}"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.__exit__(*exc)

    # -- keys and tokens -------------------------------------------------------------------------
    def rotate(self, *, keep: int = 1) -> str:
        """Publish a new signing key (used from now on), keeping `keep` older ones; its kid."""
        kid = secrets.token_hex(4)
        self.keys = [(kid, ec.generate_private_key(ec.SECP256R1())), *self.keys[:keep]]
        return kid

    def jwks(self) -> dict[str, list[dict[str, object]]]:
        keys: list[dict[str, object]] = []
        for kid, key in self.keys:
            jwk = jwt.algorithms.ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": "ES256"})
        return {"keys": keys}

    def mint(
        self,
        *,
        aud: str | list[str],
        sub: str | None = None,
        scope: str = "",
        client_id: str = "service",
        expires_in: float = 300,
        iss: str | None = None,
        key: ec.EllipticCurvePrivateKey | None = None,
        kid: str | None = None,
        typ: str | None = "at+jwt",
        **claims: object,
    ) -> str:
        """A signed access token (RFC 9068 shape); `key`/`kid` forge one, `iss` lies, `typ`
        another JOSE type ("JWT": an ID token's; None: no typ at all)."""
        now = time.time()
        body: dict[str, object] = {
            "iss": iss if iss is not None else self.issuer,
            "sub": self.user if sub is None else sub, "aud": aud,
            "client_id": client_id, "iat": int(now), "exp": int(now + expires_in),
            "jti": secrets.token_hex(8), **claims,
        }
        if scope:
            body["scope"] = scope
        signing_kid, signing_key = self.keys[0]
        return jwt.encode(body, key or signing_key, algorithm="ES256",
                          headers={"kid": kid or signing_kid, "typ": typ})

    def mint_opaque(self, *, aud: str, sub: str | None = None, scope: str = "",
                    expires_in: float = 300, active: bool = True, iss: str | None = None,
                    with_iss: bool = True) -> str:
        """An opaque token only introspection can explain; its introspection names `iss`
        (default this issuer), or no issuer at all without `with_iss`."""
        token = secrets.token_urlsafe(24)
        self.opaque[token] = {"active": active, "sub": self.user if sub is None else sub,
                              "aud": aud, "scope": scope, "client_id": "service",
                              "exp": int(time.time() + expires_in)}
        if with_iss:
            self.opaque[token]["iss"] = self.issuer if iss is None else iss
        return token

    # -- HTTP ------------------------------------------------------------------------------------
    def metadata(self) -> dict[str, object]:
        base = self.issuer
        return {
            "issuer": base, "jwks_uri": f"{base}/jwks",
            "authorization_endpoint": f"{base}/authorize", "token_endpoint": f"{base}/token",
            "introspection_endpoint": f"{base}/introspect",
            "registration_endpoint": f"{base}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "client_credentials",
                                      "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "dpop_signing_alg_values_supported": ["ES256", "RS256", "PS256", "EdDSA"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic",
                                                      "client_secret_post", "none"],
        }

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        route = scope["path"].removeprefix(self.path) if self.path else scope["path"]
        if scope["path"] == f"/.well-known/oauth-authorization-server{self.path}":
            route = "/metadata"
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        status, reply, extra = await self._route(route, form, query, headers)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), *extra]})
        await send({"type": "http.response.body", "body": msgspec.json.encode(reply)})

    async def _route(self, route: str, form: dict[str, str], query: dict[str, str],
                     headers: Mapping[str, str]) -> tuple[int, object, list[tuple[bytes, bytes]]]:
        if route == "/metadata":
            return 200, self.metadata(), []
        if route == "/jwks":
            self.jwks_hits += 1
            if self.jwks_mode == "down":
                return 503, {"error": "down"}, []
            if self.jwks_mode == "hang":
                await asyncio.sleep(60)
            return 200, self.jwks(), []
        if route == "/token":
            return self._token(form, headers)
        if route == "/introspect":
            return self._introspect(form, headers)
        if route == "/authorize":
            return self._authorize(query)
        if route == "/register":
            return self._register(form)
        return 404, {"error": "not_found"}, []

    def _client(self, form: Mapping[str, str], headers: Mapping[str, str]) -> str | None:
        """The authenticated client id (basic or post), or a public client's id; None: bad."""
        basic = headers.get("authorization", "")
        if basic.lower().startswith("basic "):
            user, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
        else:
            user, secret = form.get("client_id", ""), form.get("client_secret", "")
        if user not in self.clients:
            return None
        expected = self.clients[user]
        return user if expected is None or secrets.compare_digest(expected, secret) else None

    def _token(self, form: dict[str, str], headers: Mapping[str, str]
               ) -> tuple[int, object, list[tuple[bytes, bytes]]]:
        client = self._client(form, headers)
        if client is None:
            return 401, {"error": "invalid_client"}, []
        grant = form.get("grant_type")
        if grant == "client_credentials":
            grant_info = {"sub": client, "scope": form.get("scope", ""),
                          "resource": form.get("resource", "")}
        elif grant == "authorization_code":
            grant_info = self.codes.pop(form.get("code", ""), {})
            verifier = form.get("code_verifier", "")
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            if (not grant_info or grant_info["client_id"] != client
                    or digest.rstrip(b"=").decode() != grant_info["challenge"]
                    or form.get("redirect_uri") != grant_info["redirect_uri"]):
                return 400, {"error": "invalid_grant"}, []
        elif grant == "refresh_token":
            grant_info = self.refresh.get(form.get("refresh_token", ""), {})
            if not grant_info or grant_info["client_id"] != client:
                return 400, {"error": "invalid_grant"}, []
        else:
            return 400, {"error": "unsupported_grant_type"}, []
        resource = form.get("resource") or grant_info["resource"]
        scope = form.get("scope") or grant_info["scope"]
        bound: dict[str, object] = {}
        if "dpop" in headers:  # RFC 9449 §5: a proof of the client's key binds the token to it
            jkt = self.dpop_key(headers["dpop"])
            if jkt is None:
                return 400, {"error": "invalid_dpop_proof"}, []
            bound = {"cnf": {"jkt": jkt}}
        token = self.mint(aud=resource or self.issuer, sub=grant_info["sub"], scope=scope,
                          client_id=client, **bound)
        reply: dict[str, object] = {"access_token": token,
                                    "token_type": "DPoP" if bound else "Bearer",
                                    "expires_in": 300, "scope": scope}
        if grant != "client_credentials":
            refresh = secrets.token_urlsafe(16)
            self.refresh[refresh] = {"sub": grant_info["sub"], "client_id": client,
                                     "scope": scope, "resource": resource}
            reply["refresh_token"] = refresh
        return 200, reply, [(b"cache-control", b"no-store")]

    def dpop_key(self, proof: str) -> str | None:
        """The RFC 7638 thumbprint of a valid token-request proof's key (None: invalid)."""
        try:
            header = jwt.get_unverified_header(proof)
            jwk = header["jwk"]
            claims = jwt.decode(proof, jwt.PyJWK(jwk, algorithm=header["alg"]),
                                algorithms=[header["alg"]])
        except (jwt.PyJWTError, KeyError, TypeError, ValueError):
            return None
        if (header.get("typ") != "dpop+jwt" or claims.get("htm") != "POST"
                or claims.get("htu") != f"{self.issuer}/token"
                or abs(time.time() - claims.get("iat", 0)) > 60):
            return None
        return jwk_thumbprint(jwk)

    def _authorize(self, query: dict[str, str]) -> tuple[int, object, list[tuple[bytes, bytes]]]:
        """Approves at once as `user` (no login page) and redirects with a code."""
        if (query.get("client_id") not in self.clients or query.get("response_type") != "code"
                or query.get("code_challenge_method") != "S256" or "redirect_uri" not in query):
            return 400, {"error": "invalid_request"}, []
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"client_id": query["client_id"], "sub": self.user,
                            "redirect_uri": query["redirect_uri"],
                            "challenge": query.get("code_challenge", ""),
                            "scope": query.get("scope", ""), "resource": query.get("resource", "")}
        answer = {"code": code, "iss": self.issuer}
        if "state" in query:
            answer["state"] = query["state"]
        location = f"{query['redirect_uri']}?{urlencode(answer)}"
        return 302, {}, [(b"location", location.encode())]

    def _register(self, form: dict[str, str]) -> tuple[int, object, list[tuple[bytes, bytes]]]:
        client_id = f"dyn-{secrets.token_hex(4)}"
        self.clients[client_id] = None  # a public client (PKCE, no secret)
        return 201, {"client_id": client_id, "token_endpoint_auth_method": "none"}, []

    def _introspect(self, form: dict[str, str], headers: Mapping[str, str]
                    ) -> tuple[int, object, list[tuple[bytes, bytes]]]:
        if self._client(form, headers) is None:
            return 401, {"error": "invalid_client"}, []
        found = self.opaque.get(form.get("token", ""))
        if found is None or not found["active"]:
            return 200, {"active": False}, []
        return 200, found, []
