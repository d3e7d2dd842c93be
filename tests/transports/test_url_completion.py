"""URL elicitation that completes (#29), over real HTTP: examples/connect.py on two replicas.

The replicas share keys and a SQLite store (as two processes would); a fake provider signs the
user in and redirects the browser (httpx) to a replica's completion route. Before that, a retry
is a "not yet" round at once (no blocking); after it, the retry on the other replica completes.
A forged id, or one minted under other keys, is refused and completes nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx
import msgspec
import pytest

from examples import connect
from mrtr.client import Client, Handlers
from mrtr.client.transports import HTTPTransport
from mrtr.http import McpApp
from mrtr.protocol import ElicitRequestParams, ElicitResult
from mrtr.server import Dispatcher, Sealer
from mrtr.stores import SQLiteStore
from tests.transports.conftest import LiveServer, call, free_port, post_args, run

URL_CAPS = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}}}
HINT = "io.github.mrtr/retryAfterMs"


async def provider_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The third party's sign-in page: the user is "ann"; back to redirect_uri with a code."""
    if scope["type"] != "http":
        return
    query = parse_qs(scope.get("query_string", b"").decode())
    target = f"{query['redirect_uri'][0]}?{urlencode({'code': connect.provider.sign_in('ann')})}"
    await send({"type": "http.response.start", "status": 302,
                "headers": [(b"location", target.encode()), (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    keys = [b"r" * 32]
    ports = [free_port(), free_port()]
    apps = [McpApp(Dispatcher(connect.app, store=SQLiteStore(tmp_path / "store.db"),
                              sealer=Sealer(keys=keys, audience=connect.app.name)),
                   allowed_hosts=[f"127.0.0.1:{port}"]) for port in ports]
    with LiveServer(apps[0], ports[0]) as one, LiveServer(apps[1], ports[1]) as two, \
            LiveServer(provider_app) as provider:
        saved = connect.PUBLIC_URL, connect.PROVIDER_URL
        connect.PUBLIC_URL, connect.PROVIDER_URL = two.url, provider.url  # redirect to replica 2
        try:
            yield one.url, two.url, provider.url
        finally:
            connect.PUBLIC_URL, connect.PROVIDER_URL = saved


def post(http: httpx.Client, base: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = http.post(f"{base}/mcp", **post_args(body))
    assert reply.status_code == 200, reply.text
    result: dict[str, Any] = msgspec.json.decode(reply.content)["result"]
    return result


@pytest.mark.slow
def test_the_retry_completes_on_another_replica_once_the_page_is_done(
    replicas: tuple[str, str, str],
) -> None:
    one, two, _ = replicas
    with httpx.Client(timeout=10) as http:
        first = post(http, one, call("connect_calendar", extra_meta=URL_CAPS))
        ask = first["inputRequests"]["sign-in"]
        url = ask["params"]["url"]
        assert ask["params"]["mode"] == "url" and url.startswith(connect.PROVIDER_URL)
        state = first["requestState"]
        accepted = {"inputResponses": {"sign-in": {"action": "accept"}}}
        for n, base in enumerate((one, two, one) * 4):  # 12 "not yet" rounds: none counts
            started = time.monotonic()
            waiting = post(http, base, call("connect_calendar", id=10 + n, extra_meta=URL_CAPS,
                                            requestState=state, **accepted))
            assert time.monotonic() - started < 1.0  # "not yet" at once, never blocking
            assert waiting["resultType"] == "input_required"
            assert "inputRequests" not in waiting and waiting["_meta"][HINT] == 2000
            state = waiting["requestState"]
        page = http.get(url, follow_redirects=True)  # sign in; the provider redirects to `two`
        assert page.status_code == 200 and page.json()["status"] == "complete"
        assert str(page.url).startswith(f"{two}/mcp/elicitation/complete/")
        done = post(http, one, call("connect_calendar", id=99, extra_meta=URL_CAPS,
                                    requestState=state, **accepted))
    assert done["content"][0]["text"] == "Calendar of ann connected."


@pytest.mark.slow
def test_a_forged_or_foreign_completion_id_is_refused(replicas: tuple[str, str, str]) -> None:
    one, _, _ = replicas
    foreign = Dispatcher(connect.app, sealer=Sealer(keys=[b"x" * 32], audience=connect.app.name))
    other_id = foreign.completions.mint("0" * 32)
    with httpx.Client(timeout=10) as http:
        for elicitation_id in ("v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", other_id, ""):
            reply = http.get(f"{one}/mcp/elicitation/complete/{elicitation_id}?code=x")
            assert reply.status_code == 400, reply.text
        assert http.put(f"{one}/mcp/elicitation/complete/{other_id}").status_code == 405


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_mrtr_client_connects_in_both_eras(replicas: tuple[str, str, str], mode: str) -> None:
    one, _, _ = replicas
    opened: list[str] = []
    later: list[asyncio.Task[None]] = []

    async def sign_in(url: str) -> None:  # the user takes a moment on the provider's page
        await asyncio.sleep(0.5)
        async with httpx.AsyncClient(timeout=10) as browser:
            page = await browser.get(url, follow_redirects=True)
        opened.append(str(page.url))

    async def elicit(params: ElicitRequestParams) -> ElicitResult:
        assert params.mode == "url" and isinstance(params.url, str)
        later.append(asyncio.create_task(sign_in(params.url)))
        return ElicitResult(action="accept")  # consent to open it; not done yet

    async def scenario() -> str:
        handlers = Handlers(elicitation=elicit, url=True)
        async with Client(HTTPTransport(f"{one}/mcp"), handlers=handlers, mode=mode) as client:  # type: ignore[arg-type]
            result = await client.call_tool("connect_calendar")
            return str(result.content[0].text)  # type: ignore[union-attr]

    assert run(scenario()) == "Calendar of ann connected."
    assert len(opened) == 1 and "/mcp/elicitation/complete/" in opened[0]
