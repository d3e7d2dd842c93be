"""OAuth 2.1 for MCP clients: discovery, registration, PKCE, refresh, step-up, client credentials.

`HTTPTransport(url, auth=OAuth(redirect=LoopbackRedirect()))` authorizes every request.
"""

import warnings

from mrtr.client.auth._assertion import PrivateKeyJWT
from mrtr.client.auth._dpop import DPoP
from mrtr.client.auth._flow import (
    AuthFlow,
    Authorize,
    AuthStep,
    Callback,
    HTTPSend,
    OAuthSettings,
    RedirectUri,
    check_callback,
)
from mrtr.client.auth._metadata import (
    AuthError,
    Challenge,
    ProtectedResourceMetadata,
    ServerMetadata,
    parse_challenge,
    resource_metadata_urls,
    server_metadata_urls,
)
from mrtr.client.auth._oauth import OAuth, RedirectHandler
from mrtr.client.auth._pkce import Pkce, challenge_of, new_pkce
from mrtr.client.auth._redirect import HeadlessRedirect, LoopbackRedirect, parse_callback
from mrtr.client.auth._requests import ClientAssertion
from mrtr.client.auth._storage import (
    ClientInfo,
    FileTokenStorage,
    MemoryTokenStorage,
    Tokens,
    TokenStorage,
)

__all__ = [
    "AuthError",
    "AuthFlow",
    "Authorize",
    "AuthStep",
    "Callback",
    "Challenge",
    "challenge_of",
    "check_callback",
    "ClientAssertion",
    "ClientInfo",
    "DPoP",
    "FileTokenStorage",
    "HeadlessRedirect",
    "HTTPSend",
    "LoopbackRedirect",
    "MemoryTokenStorage",
    "new_pkce",
    "OAuth",
    "OAuthSettings",
    "parse_callback",
    "parse_challenge",
    "Pkce",
    "PrivateKeyJWT",
    "ProtectedResourceMetadata",
    "RedirectHandler",
    "RedirectUri",
    "resource_metadata_urls",
    "server_metadata_urls",
    "ServerMetadata",
    "Tokens",
    "TokenStorage",
]

# The flow's steps were `Send` and `Step`, the names of mrtr.client's own flow steps.
_DEPRECATED = {"Send": "HTTPSend", "Step": "AuthStep"}


def __getattr__(name: str) -> object:
    new = _DEPRECATED.get(name)
    if new is None:
        raise AttributeError(f"module 'mrtr.client.auth' has no attribute {name!r}")
    warnings.warn(f"mrtr.client.auth.{name} is now mrtr.client.auth.{new}", DeprecationWarning,
                  stacklevel=2)
    return globals()[new]
