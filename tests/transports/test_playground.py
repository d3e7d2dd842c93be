"""The playground's server side (#33): off by default, loopback only, CSP, its replay witness.

The page itself runs in a real Chromium in test_playground_browser.py (slow).
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest

from examples import bookings
from mrtr import Context, Form, Server
from mrtr.cli import main
from mrtr.http import McpApp
from mrtr.http._playground import CSP, TRACE_HEADER, asset
from mrtr.server import Dispatcher
from mrtr.serving._serve import _app, serve
from tests.transports.conftest import ROOT, asgi_client, call, post_args, run

PAGES = ("index.html", "app.js", "app.css")

echo = Server("echo", version="1")


class Who(Form):
    name: str


@echo.tool()
async def greet(ctx: Context, greeting: str) -> str:
    """Ask for a name, then greet it."""
    who = await ctx.elicit("Who?", Who, key="name")
    return f"{greeting}, {who.name}"


def test_33_the_page_ships_in_the_package_without_inline_script_or_external_urls() -> None:
    folder = resources.files("mrtr.http.playground")
    assert sorted(p.name for p in folder.iterdir() if p.name in PAGES) == sorted(PAGES)
    html = asset("index.html").decode()
    scripts = re.findall(r"<script\b[^>]*>", html)
    assert scripts and all('src="/_playground/' in tag for tag in scripts)
    assert "<style" not in html and " style=" not in html and " on" not in html.replace(
        " one", "")  # no inline handlers: the CSP would refuse them
    for name in PAGES:
        text = asset(name).decode()
        assert not re.search(r"""(src|href)=["']https?:""", text)
        assert "import(" not in text and "@import" not in text


def get(app: McpApp, path: str, base: str = "http://127.0.0.1:8000") -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base) as c:
            return await c.get(path)

    return run(go())


def test_33_off_by_default_and_on_when_asked_with_a_strict_csp() -> None:
    assert get(McpApp(bookings.app), "/").status_code == 404
    assert get(McpApp(bookings.app), "/_playground/app.js").status_code == 404
    app = McpApp(bookings.app, playground=True)
    page = get(app, "/")
    assert page.status_code == 200 and page.headers["content-security-policy"] == CSP
    assert "default-src 'self'" in CSP and "unsafe" not in CSP
    assert page.headers["content-type"].startswith("text/html")
    script = get(app, "/_playground/app.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javasc")
    info = get(app, "/_playground/info").json()
    assert info["endpoint"] == "/mcp" and info["store"] == "MemoryStore"


def test_33_refused_on_a_public_bind_unless_forced() -> None:
    public = "http://10.1.2.3:8000"  # the ASGI `server` address: the socket's bind
    for mode, status in ((True, 404), ("force", 200)):
        app = McpApp(bookings.app, playground=mode, allowed_hosts=["10.1.2.3"])
        assert get(app, "/", public).status_code == status


def test_33_unreachable_under_mrtr_serve_unless_enabled() -> None:
    served = _app(bookings.app, None, "/mcp", ["127.0.0.1"], False)
    assert isinstance(served, McpApp) and get(served, "/").status_code == 404
    enabled = _app(bookings.app, None, "/mcp", ["127.0.0.1"], False, playground=True)
    assert isinstance(enabled, McpApp) and get(enabled, "/").status_code == 200


def test_33_mrtr_serve_and_dev_refuse_the_playground_on_a_public_bind_without_force(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ValueError, match="--force"):
        serve("examples.bookings:app", host="0.0.0.0", playground=True)  # noqa: S104
    with pytest.raises(ValueError, match="one HTTP process"):
        serve("examples.bookings:app", workers=2, playground=True)
    assert main(["serve", "examples.bookings:app", "--host", "0.0.0.0", "--playground"]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["serve", "examples.bookings:app", "--force"]) == 2
    assert "--force applies to --playground only" in capsys.readouterr().err
    assert main(["dev", "examples/bookings.py", "--host", "0.0.0.0"]) == 2  # noqa: S104
    assert "add --force" in capsys.readouterr().err


def test_33_validation_uses_the_servers_own_rules_and_sentences() -> None:
    app = McpApp(bookings.app, playground=True)
    schema = bookings.ReturnDetails.requested_schema()

    async def go(content: dict[str, Any]) -> dict[str, Any]:
        async with asgi_client(app) as client:
            reply = await client.post("/_playground/validate",
                                      json={"schema": schema, "content": content})
            answer: dict[str, Any] = reply.json()
            return answer

    bad = run(go({"reason": "nope", "email": "ann@example", "boxes": 9,
                  "pickup_date": "tomorrow"}))["problems"]
    assert bad["email"].startswith("must be a valid email address")
    assert bad["reason"] == "must be one of: broken, wrong item, other"
    assert bad["boxes"] == "must be at least 1" or bad["boxes"] == "must be at most 5"
    assert bad["pickup_date"] == "must be a date such as 2026-07-28"
    good = {"reason": "broken", "email": "ann@example.com", "boxes": 2, "pickup_date": "2026-12-10"}
    assert run(go(good)) == {"problems": {}}


def replayed_rounds(app: McpApp) -> list[list[dict[str, Any]]]:
    """Round 1, round 2, then round 2 again byte for byte: what the witness filed for each."""

    async def go() -> list[list[dict[str, Any]]]:
        async with asgi_client(app) as client:
            filed = []

            async def send(body: dict[str, Any], trace: str) -> dict[str, Any]:
                reply = await client.post("/mcp", **post_args(body, **{TRACE_HEADER: trace}))
                seen = await client.get(f"/_playground/trace?id={trace}")
                filed.append(seen.json()["rounds"])
                result: dict[str, Any] = reply.json()["result"]
                return result

            first = await send(call("greet", {"greeting": "hi"}, id=1), "t1")
            retry = call("greet", {"greeting": "hi"}, id=2, requestState=first["requestState"],
                         inputResponses={"name": {"action": "accept",
                                                  "content": {"name": "Ann"}}})
            done = await send(retry, "t2")
            again = await send(retry, "t3")
            assert done == again and done["content"][0]["text"] == "hi, Ann"
            return filed

    return run(go())


def test_33_the_witness_reports_a_stored_replay_and_the_honest_opposite_without_a_store() -> None:
    with_store = replayed_rounds(McpApp(echo, playground=True))
    assert [[r["round"] for r in rounds] for rounds in with_store] == [[1], [2], [2]]
    assert [rounds[0]["replayed"] for rounds in with_store] == [False, False, True]
    assert with_store[1][0]["flow"] == with_store[2][0]["flow"] != ""
    without = replayed_rounds(McpApp(Dispatcher(echo, store=None), playground=True))
    assert [rounds[0]["replayed"] for rounds in without] == [False, False, False]


def test_33_an_unknown_trace_is_unknown_and_an_app_without_playground_files_nothing() -> None:
    app = McpApp(echo, playground=True)
    assert get(app, "/_playground/trace?id=nope").json() == {"known": False, "rounds": []}
    assert get(app, "/_playground/nothing").status_code == 404
    plain = McpApp(echo)

    async def go() -> None:
        async with asgi_client(plain) as client:
            await client.post("/mcp", **post_args(call("greet", {"greeting": "hi"}),
                                                    **{TRACE_HEADER: "x"}))

    run(go())
    assert type(plain.dispatcher.request_log).__name__ == "RequestLog"


@pytest.mark.slow
def test_33_the_wheel_ships_the_page(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path),
                    str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("mrtr-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"mrtr/http/playground/{name}" for name in PAGES} <= names


@echo.tool()
def stamp(text: str) -> str:
    """No asks: one round."""
    return f"stamped {text}"


def test_33_a_call_replayed_by_its_idempotency_key_is_reported_replayed() -> None:
    app = McpApp(echo, playground=True)

    async def go() -> list[bool]:
        async with asgi_client(app) as client:
            seen = []
            for number in (1, 2):
                body = call("stamp", {"text": "x"}, id=number, idempotencyKey="k-1")
                reply = await client.post("/mcp", **post_args(body, **{TRACE_HEADER: f"i{number}"}))
                assert reply.json()["result"]["content"][0]["text"] == "stamped x"
                rounds = (await client.get(f"/_playground/trace?id=i{number}")).json()["rounds"]
                seen.append(rounds[0]["replayed"])
            return seen

    assert run(go()) == [False, True]
