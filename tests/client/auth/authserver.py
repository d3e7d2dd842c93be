"""A small real OAuth authorization server (and a protected resource) for the client's tests.

Auto-approves /authorize, issues RS256 JWT access tokens (PyJWT) with a JWKS, registers
clients (RFC 7591), refreshes tokens, and serves RFC 8414 / RFC 9728 metadata. `/mcp` is a
protected resource that checks the token and answers 401, 403 insufficient_scope or 200.
Knobs on `AuthServer` let a test make it misbehave (wrong issuer, malformed metadata, ...).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any
from urllib.parse import parse_qs, urlencode

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.transports.conftest import LiveServer

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class AuthServer:
    """The ASGI app; `base` is set once the port is known (LiveAS does it)."""

    def __init__(self) -> None:
        self.base = ""
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "k1"
        self.log: list[tuple[str, str, dict[str, str]]] = []  # (method, path, params)
        self.codes: dict[str, dict[str, str]] = {}
        self.refresh: dict[str, dict[str, str]] = {}
        self.clients: dict[str, dict[str, Any]] = {}
        # knobs
        self.metadata_issuer: str | None = None  # None: the real issuer
        self.metadata_body: bytes | None = None  # raw metadata body (malformed documents)
        self.prm_body: bytes | None = None
        self.iss_in_redirect: str | None = "correct"  # "correct", "wrong" or None (absent)
        self.scopes_supported = ["mcp:read", "mcp:write", "offline_access"]
        self.required_scopes: list[str] = ["mcp:read"]
        self.token_lifetime = 3600
        self.challenge_scope: str | None = "mcp:read"
        self.auth_methods = ["none", "client_secret_basic"]
        self.stall_metadata = False
        self.withheld: set[str] = set()  # scopes never granted, whatever is asked
        self.prm_resource: str | None = None  # the resource its PRM names (default: /mcp here)

    @property
    def issuer(self) -> str:
        return self.base

    @property
    def resource(self) -> str:
        return self.base + "/mcp"

    def paths(self) -> list[str]:
        return [path for _, path, _ in self.log]

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def mint(self, sub: str, client_id: str, scope: str, resource: str) -> str:
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": sub, "aud": resource or self.resource,
                  "client_id": client_id, "scope": scope, "iat": now,
                  "exp": now + self.token_lifetime}
        return jwt.encode(claims, self.key, algorithm="RS256",
                          headers={"kid": self.kid, "typ": "at+jwt"})  # RFC 9068 §2.1

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        method, path = scope["method"], scope["path"]
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()} if method == "POST" else {}
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.log.append((method, path, {**query, **form}))
        status, out_headers, out = await self.route(method, path, query, form, body, headers)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(k.encode(), v.encode()) for k, v in out_headers.items()]})
        await send({"type": "http.response.body", "body": out})

    async def route(self, method: str, path: str, query: dict[str, str], form: dict[str, str],
                    body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if path in ("/.well-known/oauth-authorization-server",
                    "/.well-known/openid-configuration"):
            if self.stall_metadata:
                import asyncio

                await asyncio.sleep(3600)
            return _raw(self.metadata_body) if self.metadata_body is not None else \
                _json(200, self.metadata())
        if path == "/.well-known/oauth-protected-resource/mcp":
            if self.prm_body is not None:
                return _raw(self.prm_body)
            return _json(200, {"resource": self.prm_resource or self.resource,
                               "authorization_servers": [self.issuer],
                               "scopes_supported": self.required_scopes})
        if path in ("/jwks", "/.well-known/jwks.json"):
            return _json(200, self.jwks())
        if path == "/authorize":
            return self.authorize(query)
        if path == "/token" and method == "POST":
            return self.token(form, headers)
        if path == "/register" and method == "POST":
            return self.register(json.loads(body))
        if path == "/mcp":
            return self.protected(headers)
        return _json(404, {"error": "not_found"})

    def metadata(self) -> dict[str, Any]:
        return {"issuer": self.metadata_issuer or self.issuer,
                "authorization_endpoint": self.base + "/authorize",
                "token_endpoint": self.base + "/token",
                "registration_endpoint": self.base + "/register",
                "jwks_uri": self.base + "/jwks",
                "scopes_supported": self.scopes_supported,
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token",
                                          "client_credentials"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": self.auth_methods,
                "authorization_response_iss_parameter_supported":
                    self.iss_in_redirect is not None}

    def authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if query.get("client_id") not in self.clients or query.get("response_type") != "code":
            return _json(400, {"error": "invalid_request"})
        code = secrets.token_urlsafe(16)
        self.codes[code] = query
        back: dict[str, str] = {"code": code, "state": query.get("state", "")}
        if self.iss_in_redirect == "correct":
            back["iss"] = self.issuer
        elif self.iss_in_redirect == "wrong":
            back["iss"] = "https://evil.example"
        return 302, {"location": query["redirect_uri"] + "?" + urlencode(back)}, b""

    def token(self, form: dict[str, str], headers: dict[str, str]
              ) -> tuple[int, dict[str, str], bytes]:
        client_id = self.client_of(form, headers)
        if client_id is None:
            return _json(401, {"error": "invalid_client"})
        grant = form.get("grant_type")
        if grant == "authorization_code":
            asked = self.codes.pop(form.get("code", ""), None)
            if asked is None or asked["client_id"] != client_id:
                return _json(400, {"error": "invalid_grant"})
            verifier = form.get("code_verifier", "")
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            if digest.rstrip(b"=").decode() != asked.get("code_challenge"):
                return _json(400, {"error": "invalid_grant", "error_description": "PKCE"})
            scope, resource = asked.get("scope", ""), asked.get("resource", "")
            scope = " ".join(s for s in scope.split() if s not in self.withheld)
        elif grant == "refresh_token":
            held = self.refresh.pop(form.get("refresh_token", ""), None)
            if held is None:
                return _json(400, {"error": "invalid_grant"})
            scope, resource = held["scope"], held["resource"]
        else:
            return _json(400, {"error": "unsupported_grant_type"})
        refresh = secrets.token_urlsafe(16)
        self.refresh[refresh] = {"scope": scope, "resource": resource}
        return _json(200, {"access_token": self.mint("user-1", client_id, scope, resource),
                           "token_type": "Bearer", "expires_in": self.token_lifetime,
                           "refresh_token": refresh, "scope": scope})

    def client_of(self, form: dict[str, str], headers: dict[str, str]) -> str | None:
        basic = headers.get("authorization", "")
        if basic.startswith("Basic "):
            cid, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            known = self.clients.get(cid)
            return cid if known and known.get("client_secret") == secret else None
        cid = form.get("client_id", "")
        known = self.clients.get(cid)
        return cid if known and known.get("client_secret") in (None, form.get("client_secret")) \
            else None

    def register(self, request: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        method = request.get("token_endpoint_auth_method", "none")
        client: dict[str, Any] = {"client_id": "client-" + secrets.token_hex(4),
                                  "token_endpoint_auth_method": method, **request}
        if method != "none":
            client["client_secret"] = secrets.token_urlsafe(16)
        self.clients[client["client_id"]] = client
        return _json(201, client)

    def protected(self, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        prm = self.base + "/.well-known/oauth-protected-resource/mcp"
        scope_part = f', scope="{self.challenge_scope}"' if self.challenge_scope else ""
        challenge = {"www-authenticate": f'Bearer resource_metadata="{prm}"{scope_part}'}
        token = headers.get("authorization", "").removeprefix("Bearer ")
        try:
            claims = jwt.decode(token, self.key.public_key(), algorithms=["RS256"],
                                audience=self.resource, issuer=self.issuer)
        except jwt.PyJWTError:
            return 401, {**challenge, "content-type": "application/json"}, b"{}"
        granted = set(str(claims.get("scope", "")).split())
        missing = [s for s in self.required_scopes if s not in granted]
        if missing:
            needed = " ".join(self.required_scopes)
            return 403, {"www-authenticate": f'Bearer error="insufficient_scope", '
                         f'scope="{needed}", resource_metadata="{prm}"'}, b"{}"
        return _json(200, {"sub": claims["sub"], "scope": claims.get("scope", "")})


def _json(status: int, value: object) -> tuple[int, dict[str, str], bytes]:
    return status, {"content-type": "application/json"}, json.dumps(value).encode()


def _raw(body: bytes) -> tuple[int, dict[str, str], bytes]:
    return 200, {"content-type": "application/json"}, body


def authenticator_for(server: AuthServer, resource: str
                      ) -> Callable[[Mapping[str, str]], Awaitable[str | None]]:
    """An McpApp authenticator accepting this server's tokens for `resource` (else 401)."""
    from mrtr.errors import Unauthorized

    server.prm_resource = resource
    prm = server.base + "/.well-known/oauth-protected-resource/mcp"

    async def authenticate(headers: Mapping[str, str]) -> str | None:
        token = headers.get("authorization", "").removeprefix("Bearer ")
        try:
            claims = jwt.decode(token, server.key.public_key(), algorithms=["RS256"],
                                audience=resource, issuer=server.issuer)
        except jwt.PyJWTError:
            raise Unauthorized(challenge=f'Bearer resource_metadata="{prm}"') from None
        return f"{server.issuer}|{claims['sub']}"

    return authenticate


class LiveAS:
    """uvicorn serving an AuthServer on 127.0.0.1 (random port) in a background thread."""

    def __init__(self, server: AuthServer | None = None) -> None:
        self.app = server or AuthServer()
        self.live = LiveServer(self.app)

    def __enter__(self) -> AuthServer:
        self.app.base = self.live.__enter__().url
        return self.app

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)
