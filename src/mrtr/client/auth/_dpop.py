"""DPoP (RFC 9449): proofs of possession for token requests and resource requests."""

# Design: the key is the caller's (a PEM private key): this package imports no cryptography
# library itself, and PyJWT (the `auth` extra) signs and exports the public JWK. Each proof is
# fresh (new `jti`); `htu` is the URL without query or fragment (§4.2); resource requests carry
# `ath`, the hash of the access token (§4.2). Nonces (§8, §9) are kept per server origin and
# replaced whenever a response carries a `DPoP-Nonce`.
from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Callable
from typing import Any

import httpx

__all__ = ["DPoP", "nonce_challenge"]


class DPoP:
    """Sign DPoP proofs with `private_key_pem` (`algorithm`: ES256, RS256, ...)."""

    def __init__(self, private_key_pem: str, *, algorithm: str = "ES256",
                 clock: Callable[[], float] = time.time) -> None:
        try:
            import jwt
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise RuntimeError("DPoP needs PyJWT: pip install 'mrtr[auth]'") from exc
        self._jwt = jwt
        self.algorithm, self.clock = algorithm, clock
        algo: Any = jwt.get_algorithm_by_name(algorithm)
        self._key = algo.prepare_key(private_key_pem)
        public: dict[str, object] = algo.to_jwk(self._key.public_key(), as_dict=True)
        self.jwk = {k: v for k, v in public.items() if k not in ("d", "p", "q", "dp", "dq", "qi")}
        self._nonces: dict[str, str] = {}

    def proof(self, method: str, url: httpx.URL, *, access_token: str | None = None) -> str:
        """A fresh proof for `method url`, bound to `access_token` when given."""
        htu = str(url.copy_with(query=None, fragment=None))
        claims: dict[str, object] = {"jti": secrets.token_urlsafe(16), "htm": method,
                                     "htu": htu, "iat": int(self.clock())}
        if access_token is not None:
            digest = hashlib.sha256(access_token.encode("ascii")).digest()
            claims["ath"] = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
        nonce = self._nonces.get(_origin(url))
        if nonce is not None:
            claims["nonce"] = nonce
        headers = {"typ": "dpop+jwt", "jwk": self.jwk}
        token: str = self._jwt.encode(claims, self._key, algorithm=self.algorithm,
                                      headers=headers)
        return token

    def sign(self, request: httpx.Request, access_token: str | None = None) -> None:
        """Set the `DPoP` header of `request` (replacing an older proof)."""
        request.headers["DPoP"] = self.proof(request.method, request.url,
                                             access_token=access_token)

    def remember(self, response: httpx.Response) -> bool:
        """Keep the response's `DPoP-Nonce`; True when it is new (worth a retry)."""
        nonce = response.headers.get("dpop-nonce")
        origin = _origin(response.request.url)
        if not nonce or self._nonces.get(origin) == nonce:
            return False
        self._nonces[origin] = nonce
        return True


def nonce_challenge(response: httpx.Response, error: str | None) -> bool:
    """True when the response asks for a DPoP nonce (RFC 9449 §8 and §9)."""
    return error == "use_dpop_nonce" and "dpop-nonce" in response.headers


def _origin(url: httpx.URL) -> str:
    return f"{url.scheme}://{url.netloc.decode('ascii')}"
