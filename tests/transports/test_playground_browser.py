"""The playground in a real headless Chromium (#33): a bookings flow in both eras, then Replay.

`mrtr dev examples/bookings.py` serves it on a free port (real uvicorn, its SQLite store). The
page drives the flow as an MCP client; the test types into it as a person would. Set
MRTR_PLAYGROUND_SCREENSHOTS=docs/images to refresh the pictures of docs/playground.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from msgspec import Meta

from mrtr import Context, Form, Server
from mrtr.http import McpApp
from mrtr.protocol import TextContent
from tests.transports.conftest import ROOT, LiveServer, cli_env, stop

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason="no chromium (Debian: apt-get install chromium)"),
]
ASK = "#ask .ask"  # the form of the pending ask, whatever its key (a 2025 ask has an id)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    """`mrtr dev examples/bookings.py --port 0`: the playground's URL and what it printed."""
    home = tmp_path_factory.mktemp("dev")
    env = {**cli_env(), "XDG_STATE_HOME": str(home / "state"), "MRTR_EPHEMERAL_KEY": "1"}
    with (home / "log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "mrtr.cli", "dev", "examples/bookings.py", "--port", "0",
             "--reload-dir", str(home)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        assert lines[2].startswith("  playground: http://127.0.0.1:"), lines
        yield lines[2].split()[1], lines
    finally:
        stop(process)  # type: ignore[arg-type]
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM,
                                              args=["--no-sandbox", "--disable-gpu"])
        try:
            yield launched
        finally:
            launched.close()


def shots(tmp_path: Path) -> Path:
    chosen = os.environ.get("MRTR_PLAYGROUND_SCREENSHOTS")
    folder = ROOT / chosen if chosen else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize("era", ["2026", "2025"])
def test_33_a_bookings_flow_validates_inline_runs_three_rounds_and_replays_from_the_store(
    dev_server: tuple[str, list[str]], browser: Any, era: str, tmp_path: Path
) -> None:
    url, printed = dev_server
    assert printed[0].startswith("mrtr dev: serving on http://127.0.0.1:")
    origin = url.rstrip("/")
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    folder = shots(tmp_path)
    try:
        response = page.goto(url)
        assert response is not None and response.status == 200
        csp = response.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "'unsafe-inline'" not in csp
        page.check(f"input[name=era][value='{era}']")
        page.click("nav button[data-name=book_return]")
        page.fill("#arg-order_id", "A-1001")
        page.click("#run")

        page.select_option(f"{ASK} select[data-key=reason]", label="broken")
        page.fill(f"{ASK} [data-key=email]", "ann@example")  # no dot in the domain
        page.fill(f"{ASK} [data-key=boxes]", "2")
        page.fill(f"{ASK} [data-key=pickup_date]", "2026-12-10")
        page.click(f"{ASK} button.submit")
        error = page.locator(f"{ASK} .error[data-for=email]")
        sync_api.expect(error).to_contain_text("must be a valid email address")
        if era == "2026":
            page.screenshot(path=str(folder / "playground-form.png"))
        page.fill(f"{ASK} [data-key=email]", "ann@example.com")
        page.click(f"{ASK} button.submit")

        page.check(f"{ASK} [data-key=confirm]")
        page.click(f"{ASK} button.submit")
        sync_api.expect(page.locator("#result .result-text")).to_contain_text("booked")
        sync_api.expect(page.locator("#timeline > li.card")).to_have_count(3)
        text = page.locator("#result .result-text").inner_text()
        assert "label sent to ann@example.com" in text

        page.click("#replay")
        note = page.locator("#replay-note")
        sync_api.expect(note).to_contain_text("stored outcome, no second execution")
        assert "(the same result)" in note.inner_text()
        page.screenshot(path=str(folder / f"playground-replay-{era}.png"), full_page=True)
    finally:
        page.close()
    assert requested and all(seen.startswith(origin + "/") for seen in requested), requested
    assert any(seen == origin + "/mcp" for seen in requested)


tour = Server("tour", version="1")


@tour.tool()
async def visit(ctx: Context) -> str:
    """Report progress and a log line, send the user to a page, then ask a model."""
    await ctx.report_progress(1, 3, "starting")
    await ctx.info("looking up the visitor")
    await ctx.elicit_url("Sign in at the provider", "http://127.0.0.1:9/signin", key="signin")
    reply = await ctx.sample("Say hello", max_tokens=20, key="model")
    text = reply.content.text if isinstance(reply.content, TextContent) else "?"
    return f"the model said: {text}"


def test_33_notifications_a_url_elicitation_in_a_new_tab_and_a_typed_sampling_reply(
    browser: Any,
) -> None:
    with LiveServer(McpApp(tour, playground=True)) as server:
        page = browser.new_page()
        try:
            page.goto(server.url + "/")
            page.click("nav button[data-name=visit]")
            page.click("#run")
            notes = page.locator("#timeline > li.card").first.locator(".notes")
            sync_api.expect(notes).to_contain_text("progress 1/3 starting")
            sync_api.expect(notes).to_contain_text("log info: looking up the visitor")
            asked: list[str] = []
            page.context.on("request", lambda request: asked.append(request.url))
            with page.context.expect_page() as opened:
                page.click(f"{ASK} button.open")
            opened.value.wait_for_load_state()
            assert "http://127.0.0.1:9/signin" in asked  # the tab went there (nobody answers)
            opened.value.close()
            page.fill(f"{ASK} textarea", "hello there")
            page.click(f"{ASK} button.submit")
            sync_api.expect(page.locator("#result .result-text")).to_have_text(
                "the model said: hello there")
            sync_api.expect(page.locator("#timeline > li.card")).to_have_count(3)
        finally:
            page.close()


@tour.tool(task="optional")
async def report(ctx: Context, quarter: str) -> str:
    """A task: polled until it completes, after one ask while it runs."""
    await ctx.report_progress(1, 2, "counting")
    if not await ctx.confirm(f"Include drafts in {quarter}?", key="drafts"):
        return f"report {quarter} without drafts"
    return f"report {quarter} with drafts"


def test_33_a_task_shows_its_live_status_and_its_ask(browser: Any) -> None:
    with LiveServer(McpApp(tour, playground=True)) as server:
        page = browser.new_page()
        try:
            page.goto(server.url + "/")
            page.click("nav button[data-name=report]")
            page.fill("#arg-quarter", "Q3")
            page.click("#run")
            status = page.locator(".task-status")
            sync_api.expect(status).to_contain_text("input_required")
            page.check(f"{ASK} [data-key=confirm]")
            page.click(f"{ASK} button.submit")
            sync_api.expect(status).to_contain_text("completed")
            sync_api.expect(page.locator("#result .result-text")).to_have_text(
                "report Q3 with drafts")
        finally:
            page.close()


class Toppings(Form):
    toppings: Annotated[list[Literal["cheese", "ham", "olives"]], Meta(min_length=1, max_length=2)]


@tour.tool()
async def pizza(ctx: Context) -> str:
    """A multi-select with bounds."""
    chosen = await ctx.elicit("Pick the toppings", Toppings, key="pick")
    return "pizza with " + " and ".join(chosen.toppings)


def test_33_a_multi_select_with_bounds_decline_and_the_copied_commands(browser: Any) -> None:
    with LiveServer(McpApp(tour, playground=True)) as server:
        page = browser.new_page()
        try:
            page.goto(server.url + "/")
            page.click("nav button[data-name=pizza]")
            page.click("#run")
            for label in ("cheese", "ham", "olives"):
                page.get_by_label(label).check()
            page.click(f"{ASK} button.submit")
            sync_api.expect(page.locator(f"{ASK} .error[data-for=toppings]")).to_have_text(
                "must have at most 2 selected")
            page.get_by_label("ham").uncheck()
            page.click(f"{ASK} button.submit")
            sync_api.expect(page.locator("#result .result-text")).to_have_text(
                "pizza with cheese and olives")
            commands = page.locator("#timeline > li.card").first
            call_line = commands.locator("pre.mrtr-call").text_content() or ""
            assert call_line == f"mrtr call {server.url}/mcp pizza"
            curl = commands.locator("pre.curl").text_content() or ""
            assert curl.startswith(f"curl -sS -X POST '{server.url}/mcp'")
            assert "-H 'Mcp-Method: tools/call'" in curl and "-H 'Mcp-Name: pizza'" in curl

            page.click("#run")
            page.click(f"{ASK} button:text('Decline')")
            last = page.locator("#timeline > li.card").last
            sync_api.expect(last.locator("pre").first).to_contain_text('"action": "decline"',
                                                                      use_inner_text=False)
        finally:
            page.close()
