"""Redirect handlers: a loopback listener for people (RFC 8252 §7.3), a headless one for tests."""

# Design: the loopback handler binds 127.0.0.1 on a random port when the flow first asks for
# the redirect URI, answers exactly one GET on /callback, and gives up after `timeout` seconds
# (AuthError), so a user who closes the browser tab never leaves the command hanging. It
# speaks just enough HTTP/1.1 for a browser; nothing else is listening on that port.
from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import webbrowser
from collections.abc import Callable, Mapping
from urllib.parse import parse_qs, urlsplit

import httpx

from mrtr.client.auth._flow import Callback
from mrtr.client.auth._metadata import AuthError

__all__ = ["has_browser", "HeadlessRedirect", "LoopbackRedirect", "parse_callback"]

_PAGE = (b"<!doctype html><title>mrtr</title><p>Authorization received. "
         b"You can close this window and return to the terminal.</p>")
_MAX_LINE = 16 * 1024


def parse_callback(url: str) -> Callback:
    """The Callback carried by a redirect URL's query."""
    query = parse_qs(urlsplit(url).query)

    def one(name: str) -> str | None:
        values = query.get(name)
        return values[0] if values else None

    return Callback(code=one("code"), state=one("state"), iss=one("iss"), error=one("error"),
                    error_description=one("error_description"))


def has_browser(env: Mapping[str, str] | None = None, platform: str = sys.platform) -> bool:
    """True where `webbrowser` would open a graphical browser (not a text one in our terminal)."""
    env = os.environ if env is None else env
    if platform in ("darwin", "win32"):
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class LoopbackRedirect:
    """Print the authorization URL (and open a browser), then wait for the redirect."""

    def __init__(self, *, open_browser: bool = True, timeout: float = 300.0,
                 show: Callable[[str], None] = _stderr, host: str = "127.0.0.1") -> None:
        self.open_browser, self.timeout, self.show, self.host = open_browser, timeout, show, host
        self._server: asyncio.Server | None = None
        self._uri: str | None = None
        self._arrived: asyncio.Queue[str] = asyncio.Queue()

    async def redirect_uri(self) -> str:
        """`http://127.0.0.1:PORT/callback`; the port is random, then kept (it is registered)."""
        await self._listen()
        assert self._uri is not None
        return self._uri

    async def authorize(self, url: str) -> Callback:
        await self._listen()
        self.show(f"Open this URL to authorize:\n  {url}")
        if self.open_browser and has_browser():
            with contextlib.suppress(Exception):
                await asyncio.to_thread(webbrowser.open, url)
        try:
            target = await asyncio.wait_for(self._arrived.get(), self.timeout)
        except TimeoutError:
            raise AuthError(f"no authorization redirect within {self.timeout:g} s") from None
        finally:
            await self.aclose()  # listen only while waiting for a redirect
        return parse_callback(target)

    async def aclose(self) -> None:
        """Stop listening (the redirect URI is kept for the token request and a later step-up)."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _listen(self) -> None:
        if self._server is not None:
            return
        port = int(self._uri.rsplit(":", 1)[1].split("/")[0]) if self._uri else 0
        self._server = await asyncio.start_server(self._serve, self.host, port)
        port = self._server.sockets[0].getsockname()[1]
        self._uri = f"http://{self.host}:{port}/callback"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target: str | None = None
        try:
            line = await asyncio.wait_for(reader.readline(), 10.0)
            parts = line.decode("latin-1").split()
            while (header := await asyncio.wait_for(reader.readline(), 10.0)) not in (
                    b"\r\n", b"\n", b""):
                if len(header) > _MAX_LINE:
                    break
            if len(parts) >= 2 and parts[0] == "GET" and urlsplit(parts[1]).path == "/callback":
                target, status, body = parts[1], b"200 OK", _PAGE
            else:
                status, body = b"404 Not Found", b"not found"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html; charset=utf-8"
                         b"\r\nConnection: close\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
        except (TimeoutError, OSError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        if target is not None:  # only now: the page is sent before the listener closes
            self._arrived.put_nowait(target)


class HeadlessRedirect:
    """Follow the authorization URL with a GET and read the redirect's `Location`.

    For authorization servers that approve without a person (tests, the conformance suite,
    machine identities); the redirect URI is only parsed, never contacted.
    """

    def __init__(self, *, redirect_uri: str = "http://127.0.0.1:33418/callback",
                 client: httpx.AsyncClient | None = None, timeout: float = 30.0) -> None:
        self._uri, self._client, self.timeout = redirect_uri, client, timeout

    async def redirect_uri(self) -> str:
        return self._uri

    async def authorize(self, url: str) -> Callback:
        try:
            if self._client is not None:
                reply = await self._client.get(url, follow_redirects=False)
            else:
                async with httpx.AsyncClient(timeout=self.timeout) as client:
                    reply = await client.get(url, follow_redirects=False)
        except httpx.HTTPError as exc:
            raise AuthError(f"authorization request to {url} failed: {exc}") from None
        location = reply.headers.get("location")
        if not reply.is_redirect or not location:
            raise AuthError(f"the authorization endpoint answered HTTP {reply.status_code} "
                            "without a redirect")
        return parse_callback(location)
