"""The benchmark server with OAuth on: every request's bearer JWT is verified (RS256, cached keys).

`mrtr serve benchmarks.auth:create_app --port 9000`; `benchmarks.auth:create_dpop_app` requires
DPoP (RFC 9449) too: the token is bound to an ES256 key and each request also gets a fresh proof
(signed here, as the client would: that signature is in what the load generator measures, and
`python -m benchmarks.auth` measures the server's own share apart, in µs per request).
The load generator sends no headers of its
own, so a request without `Authorization` is given the one token minted here, as a client
holding a token would send it; the check itself (signature, iss, aud, exp, scopes) is the real
ResourceServer path. The keys are a fixed JWKS: nothing is fetched while measuring. RS256 is the
default of most identity providers (ES256 verification costs about 70 µs more per request).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from benchmarks.server import app
from mrtr.auth import AuthSettings, JWTVerifier, KeySet, Principal, ResourceServer, thumbprint
from mrtr.client.auth import DPoP
from mrtr.http import McpApp
from mrtr.server import Dispatcher
from mrtr.stores import SQLiteStore

ISSUER = "https://issuer.bench.invalid"
AUDIENCE = "mrtr-bench"


class BenchAuth(ResourceServer):
    """A ResourceServer that lends its token to requests arriving without one."""

    def __init__(self, settings: AuthSettings, verifier: JWTVerifier, token: str) -> None:
        super().__init__(settings, verifier=verifier)
        self.bearer = f"Bearer {token}"

    async def authenticate(self, headers: Mapping[str, str], resource: str, /, *,
                           method: str = "POST", dispatcher: Dispatcher | None = None
                           ) -> Principal:
        if "authorization" not in headers:
            headers = {**headers, "authorization": self.bearer}
        return await super().authenticate(headers, resource, method=method,
                                          dispatcher=dispatcher)


class BenchDPoP(BenchAuth):
    """Lends requests without credentials its DPoP-bound token and a fresh proof for them."""

    def __init__(self, settings: AuthSettings, verifier: JWTVerifier, token: str,
                 client: DPoP) -> None:
        super().__init__(settings, verifier, token)
        self.token, self.client = token, client
        self.dpop_scheme = f"DPoP {token}"

    async def authenticate(self, headers: Mapping[str, str], resource: str, /, *,
                           method: str = "POST", dispatcher: Dispatcher | None = None
                           ) -> Principal:
        if "authorization" not in headers:
            proof = self.client.proof(method, httpx.URL(resource), access_token=self.token)
            headers = {**headers, "authorization": self.dpop_scheme, "dpop": proof}
        return await super().authenticate(headers, resource, method=method,
                                          dispatcher=dispatcher)


def _issued(cnf: dict[str, str] | None = None) -> tuple[JWTVerifier, str]:
    """A verifier with the issuer's fixed JWKS, and a token it accepts (bound to `cnf`)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True),
           "kid": "bench", "alg": "RS256", "use": "sig"}
    claims: dict[str, object] = {"iss": ISSUER, "sub": "bench-user", "aud": AUDIENCE,
                                 "client_id": "bench", "scope": "mcp",
                                 "exp": int(time.time()) + 7 * 86400}
    if cnf is not None:
        claims["cnf"] = cnf
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "bench", "typ": "at+jwt"})
    return JWTVerifier(ISSUER, KeySet(ISSUER, jwks={"keys": [jwk]})), token


def create_app() -> McpApp:
    verifier, token = _issued()
    settings = AuthSettings(issuer=ISSUER, audience=(AUDIENCE,), scopes=("mcp",))
    return McpApp(Dispatcher(app), authenticator=BenchAuth(settings, verifier, token))


def _client_key() -> tuple[DPoP, str]:
    """A client's DPoP signer (ES256) and its key's thumbprint."""
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    client = DPoP(pem)
    return client, thumbprint(client.jwk)


def create_dpop_app() -> McpApp:
    client, jkt = _client_key()
    verifier, token = _issued({"jkt": jkt})
    settings = AuthSettings(issuer=ISSUER, audience=(AUDIENCE,), scopes=("mcp",),
                            dpop="require")
    return McpApp(Dispatcher(app), authenticator=BenchDPoP(settings, verifier, token, client))


def micro(number: int = 2000) -> dict[str, float]:
    """µs per request of ResourceServer.authenticate: bearer, DPoP (the jti in a MemoryStore,
    then in SQLite), and the client's proof signature (not the server's cost); each the best
    of 5 runs of `number`."""
    client, jkt = _client_key()
    verifier, token = _issued({"jkt": jkt})
    plain_verifier, plain = _issued()
    url = "http://127.0.0.1:9000/mcp"
    bearer = ResourceServer(AuthSettings(issuer=ISSUER, audience=(AUDIENCE,)),
                            verifier=plain_verifier)
    dpop = ResourceServer(AuthSettings(issuer=ISSUER, audience=(AUDIENCE,), dpop="require"),
                          verifier=verifier)
    dispatcher = Dispatcher(app)
    results: dict[str, float] = {}

    async def timed(make: Callable[[], dict[str, str]], guard: ResourceServer) -> float:
        best = float("inf")
        for _ in range(5):
            headers = [make() for _ in range(number)]  # proofs made outside the timed loop
            started = time.perf_counter()
            for h in headers:
                await guard.authenticate(h, url, method="POST", dispatcher=dispatcher)
            best = min(best, (time.perf_counter() - started) / number * 1e6)
        return best

    def proof() -> dict[str, str]:
        return {"authorization": f"DPoP {token}",
                "dpop": client.proof("POST", httpx.URL(url), access_token=token)}

    results["bearer RS256"] = asyncio.run(timed(lambda: {"authorization": f"Bearer {plain}"},
                                                bearer))
    results["DPoP RS256 + ES256 proof"] = asyncio.run(timed(proof, dpop))
    with tempfile.TemporaryDirectory() as folder:  # the jti written to the default store
        dispatcher = Dispatcher(app, store=SQLiteStore(Path(folder) / "jti.db"))
        results["DPoP, jti in SQLite"] = asyncio.run(timed(proof, dpop))
    started = time.perf_counter()
    for _ in range(number):
        client.proof("POST", httpx.URL(url), access_token=token)
    results["client: sign a proof"] = (time.perf_counter() - started) / number * 1e6
    return results


if __name__ == "__main__":
    for name, micros in micro().items():
        print(f"{name:28} {micros:8.1f} µs")
