"""`PrivateKeyJWT`: signed client assertions for `private_key_jwt` (RFC 7523 §2.2)."""

# Design: signing goes through PyJWT (the `auth` extra), imported only when an assertion is
# made, so the rest of the OAuth client needs no JOSE library. No crypto is written here.
from __future__ import annotations

import secrets
import time
from collections.abc import Callable

__all__ = ["PrivateKeyJWT"]


class PrivateKeyJWT:
    """Sign `{iss, sub: client_id, aud: the issuer, iat, exp, jti}` with a PEM private key.

    `algorithm` is a JWS algorithm PyJWT knows (ES256, RS256, ...); `lifetime` in seconds.
    """

    def __init__(self, private_key_pem: str, *, algorithm: str = "ES256",
                 lifetime: float = 300.0, key_id: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.key, self.algorithm, self.lifetime = private_key_pem, algorithm, lifetime
        self.key_id, self.clock = key_id, clock

    def __call__(self, *, client_id: str, audience: str) -> str:
        try:
            import jwt
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise RuntimeError("private_key_jwt needs PyJWT: pip install 'mrtr[auth]'") from exc
        now = int(self.clock())
        claims = {"iss": client_id, "sub": client_id, "aud": audience, "iat": now,
                  "exp": now + int(self.lifetime), "jti": secrets.token_urlsafe(16)}
        headers = {"kid": self.key_id} if self.key_id else None
        return jwt.encode(claims, self.key, algorithm=self.algorithm, headers=headers)
