"""The benchmark server with OAuth on: every request's bearer JWT is verified (RS256, cached keys).

`mrtr serve benchmarks.auth:create_app --port 9000`. The load generator sends no headers of its
own, so a request without `Authorization` is given the one token minted here, as a client
holding a token would send it; the check itself (signature, iss, aud, exp, scopes) is the real
ResourceServer path. The keys are a fixed JWKS: nothing is fetched while measuring. RS256 is the
default of most identity providers (ES256 verification costs about 70 µs more per request).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from benchmarks.server import app
from mrtr.auth import AuthSettings, JWTVerifier, KeySet, Principal, ResourceServer
from mrtr.http import McpApp
from mrtr.server import Dispatcher

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


def create_app() -> McpApp:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True),
           "kid": "bench", "alg": "RS256", "use": "sig"}
    claims = {"iss": ISSUER, "sub": "bench-user", "aud": AUDIENCE, "client_id": "bench",
              "scope": "mcp", "exp": int(time.time()) + 7 * 86400}
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "bench", "typ": "at+jwt"})
    settings = AuthSettings(issuer=ISSUER, audience=(AUDIENCE,), scopes=("mcp",))
    verifier = JWTVerifier(ISSUER, KeySet(ISSUER, jwks={"keys": [jwk]}))
    return McpApp(Dispatcher(app), authenticator=BenchAuth(settings, verifier, token))
