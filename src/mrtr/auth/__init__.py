"""OAuth 2.1 resource server for McpApp: bearer tokens in, `ctx.principal` out (docs/auth.md)."""

from mrtr.auth._dpop import thumbprint
from mrtr.auth._keys import AuthServerDown, KeySet, UnknownKey
from mrtr.auth._resource import WELL_KNOWN, ResourceServer, metadata_url
from mrtr.auth._settings import AuthSettings
from mrtr.auth._tokens import (
    ALGORITHMS,
    Introspection,
    InvalidToken,
    JWTVerifier,
    TokenCache,
    TokenVerifier,
    principal_of,
)
from mrtr.server import Principal

__all__ = [
    "ALGORITHMS",
    "AuthServerDown",
    "AuthSettings",
    "Introspection",
    "InvalidToken",
    "JWTVerifier",
    "KeySet",
    "metadata_url",
    "Principal",
    "principal_of",
    "ResourceServer",
    "thumbprint",
    "TokenCache",
    "TokenVerifier",
    "UnknownKey",
    "WELL_KNOWN",
]
