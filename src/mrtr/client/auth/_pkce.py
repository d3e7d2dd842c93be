"""PKCE (RFC 7636) with S256, and the `state` value of an authorization request."""

from __future__ import annotations

import base64
import hashlib
import secrets

__all__ = ["Pkce", "challenge_of", "new_pkce", "new_state"]


class Pkce:
    """A code verifier (43 to 128 unreserved characters) and its S256 challenge."""

    __slots__ = ("challenge", "verifier")

    def __init__(self, verifier: str) -> None:
        self.verifier = verifier
        self.challenge = challenge_of(verifier)


def challenge_of(verifier: str) -> str:
    """BASE64URL(SHA256(verifier)) without padding (RFC 7636 §4.2)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def new_pkce() -> Pkce:
    """A fresh verifier with 256 bits of entropy (43 characters)."""
    return Pkce(secrets.token_urlsafe(32))


def new_state() -> str:
    return secrets.token_urlsafe(24)
