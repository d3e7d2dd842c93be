"""OAuth 2.1 for MCP clients: discovery, registration, PKCE, refresh, step-up, client credentials.

`HTTPTransport(url, auth=OAuth(redirect=LoopbackRedirect()))` authorizes every request.
"""

from mrtr.client.auth._assertion import PrivateKeyJWT
from mrtr.client.auth._dpop import DPoP
from mrtr.client.auth._flow import (
    AuthFlow,
    Authorize,
    Callback,
    OAuthSettings,
    RedirectUri,
    Send,
    Step,
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
    "Callback",
    "Challenge",
    "challenge_of",
    "check_callback",
    "ClientAssertion",
    "ClientInfo",
    "DPoP",
    "FileTokenStorage",
    "HeadlessRedirect",
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
    "Send",
    "server_metadata_urls",
    "ServerMetadata",
    "Step",
    "Tokens",
    "TokenStorage",
]
