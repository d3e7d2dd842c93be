"""Redirect handlers: the loopback listener (127.0.0.1 only) and the headless one."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from mrtr.client.auth import AuthError, LoopbackRedirect, parse_callback
from mrtr.client.auth._redirect import has_browser


def test_loopback_receives_the_redirect_then_stops_listening() -> None:
    shown: list[str] = []

    async def go() -> None:
        redirect = LoopbackRedirect(open_browser=False, show=shown.append, timeout=10)
        uri = await redirect.redirect_uri()
        assert uri.startswith("http://127.0.0.1:") and uri.endswith("/callback")

        async def browser() -> None:
            while not shown:
                await asyncio.sleep(0.01)
            async with httpx.AsyncClient() as http:
                assert (await http.get(uri.replace("/callback", "/other"))).status_code == 404
                page = await http.get(uri + "?code=C&state=S&iss=https%3A%2F%2Fas")
                assert page.status_code == 200

        callback, _ = await asyncio.gather(redirect.authorize("https://as/authorize?x"),
                                           browser())
        assert (callback.code, callback.state, callback.iss) == ("C", "S", "https://as")
        assert "https://as/authorize?x" in shown[0]
        with pytest.raises(httpx.ConnectError):  # the port is closed once the code is in
            async with httpx.AsyncClient() as http:
                await http.get(uri)
        assert await redirect.redirect_uri() == uri  # the registered URI stays the same
        await redirect.aclose()

    asyncio.run(go())


def test_loopback_gives_up_after_its_timeout() -> None:
    async def go() -> None:
        redirect = LoopbackRedirect(open_browser=False, show=lambda _: None, timeout=0.2)
        await redirect.authorize("https://as/authorize")

    with pytest.raises(AuthError, match="no authorization redirect within 0.2 s"):
        asyncio.run(asyncio.wait_for(go(), 10))


def test_parse_callback_error() -> None:
    callback = parse_callback("http://127.0.0.1:1/cb?error=access_denied&error_description=no")
    assert (callback.error, callback.error_description, callback.code) == (
        "access_denied", "no", None)


def test_a_browser_is_opened_only_where_there_is_a_graphical_one() -> None:
    assert not has_browser({}, "linux")
    assert has_browser({"DISPLAY": ":0"}, "linux") and has_browser({}, "darwin")
