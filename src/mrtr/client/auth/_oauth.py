"""`OAuth`: the OAuth client as an httpx.Auth, for HTTPTransport(auth=...) or any httpx client."""

# Design: the flow (AuthFlow) is sans-I/O; this driver sends its requests through httpx's auth
# machinery and answers its user steps with the RedirectHandler. The lock covers token work
# only: the MCP request itself (and its long SSE body) never holds it, so concurrent calls and
# a 2025 GET stream are not serialised behind one another.
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Protocol

import httpx

from mrtr.client.auth._dpop import DPoP
from mrtr.client.auth._flow import (
    AuthFlow,
    Authorize,
    Callback,
    Grant,
    HTTPSend,
    OAuthSettings,
    RedirectUri,
)
from mrtr.client.auth._requests import ClientAssertion
from mrtr.client.auth._storage import ClientInfo, MemoryTokenStorage, TokenStorage

__all__ = ["OAuth", "RedirectHandler"]


class RedirectHandler(Protocol):
    """Takes the user to the authorization server and brings the redirect back."""

    async def redirect_uri(self) -> str:
        """The redirect URI to register and authorize with (it may bind a port)."""
        ...

    async def authorize(self, url: str) -> Callback:
        """Send the user to `url`; return the query of the redirect back."""
        ...


class OAuth(httpx.Auth):
    """Authorize MCP requests with OAuth 2.1 (authorization code + PKCE, or client credentials).

    `client` is a pre-registered client (else the client registers itself, or uses
    `settings.client_metadata_url`); `assertion` signs `private_key_jwt` client assertions;
    `dpop` binds tokens to a key (RFC 9449) when the authorization server issues DPoP tokens.
    Raises AuthError (from the request that needed the token) when authorization fails.
    """

    def __init__(
        self,
        *,
        redirect: RedirectHandler | None = None,
        storage: TokenStorage | None = None,
        client: ClientInfo | None = None,
        grant: Grant = "authorization_code",
        assertion: ClientAssertion | None = None,
        settings: OAuthSettings | None = None,
        dpop: DPoP | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if grant == "authorization_code" and redirect is None:
            raise ValueError("the authorization code grant needs a redirect handler")
        storage = storage if storage is not None else MemoryTokenStorage()
        if client is not None and storage.load_client() != client:
            storage.save_client(client)
            storage.save_tokens(None)
        self.redirect = redirect
        self.flow = AuthFlow(storage=storage, grant=grant, settings=settings or OAuthSettings(),
                             assertion=assertion, clock=clock, dpop=dpop)
        self._lock = asyncio.Lock()
        self._timeout = httpx.Timeout(self.flow.settings.timeout).as_dict()

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response,
                                                                   None]:
        raise RuntimeError("OAuth works with httpx.AsyncClient only")
        yield request  # pragma: no cover - makes this a generator

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        steps = self.flow.run(request)
        reply: object = None
        await self._lock.acquire()
        try:
            while True:
                try:
                    step = steps.send(reply)
                except StopIteration:
                    return
                if isinstance(step, HTTPSend):
                    self._lock.release()
                    try:
                        reply = yield step.request
                    finally:
                        await self._lock.acquire()
                elif isinstance(step, httpx.Request):
                    # A request built outside a client has no timeout: give it ours.
                    step.extensions.setdefault("timeout", self._timeout)
                    response = yield step
                    await response.aread()
                    reply = response
                else:
                    reply = await self._user_step(step)
        finally:
            self._lock.release()

    async def _user_step(self, step: RedirectUri | Authorize) -> object:
        assert self.redirect is not None  # checked in __init__ for the code grant
        if isinstance(step, RedirectUri):
            return await self.redirect.redirect_uri()
        return await self.redirect.authorize(step.url)
