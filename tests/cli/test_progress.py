"""The progress bar of a long `mrtr call`, driven by the server's progress notifications (#18)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from mrtr.cli._progress import ProgressBar
from tests.cli.tty import SERVER, Tty, check_capture


@pytest.mark.slow
def test_a_long_call_shows_a_progress_bar_issue18() -> None:
    term = Tty("call", "--stdio", SERVER, "pack", "boxes=3", "seconds=0.6")
    term.wait_for("packing box 1 of 3", then="33% 1/3")
    assert term.finish() == 0
    assert "packing box 3 of 3" in term.screen and "100% 3/3" in term.screen
    check_capture("progress", term.screen)


@pytest.mark.slow
def test_no_bar_and_the_same_json_for_scripts_issue18() -> None:
    # --json at a terminal: stdout is the wire JSON alone, no panel around it.
    term = Tty("call", "--stdio", SERVER, "--json", "add", "a=2", "b=40")
    assert term.finish() == 0
    assert term.screen.startswith("{\n") and '"text": "42"' in term.screen
    assert "╭" not in term.screen


def test_server_text_in_the_bar_is_escaped_and_never_markup_issue18() -> None:
    out = io.StringIO()
    bar = ProgressBar(Console(file=out, width=80, force_terminal=False))
    bar(1, 2, "[bold red]half\x1b[2J")
    bar(2, None, None)
    bar.close()
    text = out.getvalue()
    assert "[bold red]half\\x1b[2J" not in text  # replaced by the next update's text
    assert "working" in text and "\x1b[2J" not in text
    bar(1, 4, "[b]x\x1b]0;t\x07")
    bar.close()
    assert "[b]x\\x1b]0;t\\x07" in out.getvalue() and "25%" in out.getvalue()


@pytest.mark.slow
def test_progress_over_http_ends_cleanly_issue18(http_url: str) -> None:
    # The reply arrives on an SSE stream after the notifications; the stream is closed before
    # the program ends (it used to be left to the garbage collector: "Task was destroyed").
    term = Tty("call", http_url, "pack", "boxes=2", "seconds=0.2")
    assert term.finish() == 0
    assert "100% 2/2" in term.screen and "Packed 2 boxes." in term.screen
    assert "Task was destroyed" not in term.screen and "ERROR" not in term.screen


@pytest.mark.slow
def test_ctrl_c_during_a_long_call_gives_the_cursor_back_issue18() -> None:
    term = Tty("call", "--stdio", SERVER, "pack", "boxes=5", "seconds=0.5")
    term.wait_for("packing box 1 of 5")
    assert term.term.cursor.hidden  # rich hides it while the bar is live
    term.press("ctrl-c")
    assert term.finish() == 130
    assert not term.term.cursor.hidden and "20% 1/5" in term.screen


@pytest.mark.slow
def test_a_tools_log_lines_and_progress_at_a_terminal_issue27() -> None:
    term = Tty("call", "--stdio", SERVER, "pack_logged", "order_id=A-1")
    term.wait_for("Pack order A-1?")
    assert "[info] warehouse: packing order A-1" in term.screen
    term.press("up", "enter")
    assert term.finish() == 0
    screen = term.screen
    assert screen.count("[info] warehouse: packing order A-1") == 1  # not again in round 2
    assert "[warning] the carrier is late today" in screen and "100% 2/2" in screen
    assert "Packed A-1." in screen and "[debug]" not in screen
    check_capture("logs", screen)
