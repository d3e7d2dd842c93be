"""Which terminal UI `mrtr call` picks: rich forms only with a person at a terminal (#18)."""

from __future__ import annotations

import io
import sys

import pytest

from mrtr.cli._forms_prompt import PromptForms
from mrtr.cli._forms_tui import StdConsole, TerminalForms
from mrtr.cli._screen import Screen


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("stdin", "stderr", "term", "interactive"), [
    (True, True, "xterm-256color", True),
    (True, True, None, True),
    (True, True, "dumb", False),          # TERM=dumb asks for the plain forms
    (False, True, "xterm", False),        # answers piped in
    (True, False, "xterm", False),        # prompts redirected
])
def test_rich_forms_only_at_a_terminal_issue18(
        monkeypatch: pytest.MonkeyPatch, stdin: bool, stderr: bool, term: str | None,
        interactive: bool) -> None:
    monkeypatch.setattr(sys, "stdin", Tty() if stdin else io.StringIO())
    monkeypatch.setattr(sys, "stderr", Tty() if stderr else io.StringIO())
    if term is None:
        monkeypatch.delenv("TERM", raising=False)
    else:
        monkeypatch.setenv("TERM", term)
    screen = Screen.detect(StdConsole())
    forms = screen.forms(server="s")
    assert isinstance(forms, PromptForms) is interactive and isinstance(forms, TerminalForms)
    assert (screen.progress is not None) is interactive


def test_results_are_plain_text_unless_stdout_is_a_terminal_issue18(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    screen = Screen(StdConsole(), interactive=False, rich_output=False)
    screen.show(["x"])
    assert capsys.readouterr().out == "x\n"
