"""How `mrtr call` and friends talk to a person: rich terminal UI at a TTY, plain lines else."""

# Design: one decision at start-up. With stdin and stderr on a terminal (and TERM not `dumb`)
# the forms are prompt_toolkit's and long calls get a progress bar on stderr; with stdout on a
# terminal, results are rich tables and panels. Anything piped, redirected or run by a script
# keeps the plain line input and plain text (`--json` never changes). `TERM=dumb` asks for the
# plain behaviour at a terminal too. The server's log messages are lines on stderr either way;
# at a terminal they go through the bar's console, which prints them above a live bar.
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, TextIO

from mrtr.client import ProgressHandler
from mrtr.protocol import LoggingMessageNotificationParams

from ._forms_tui import StdConsole, TerminalForms
from ._render import log_line, render

if TYPE_CHECKING:
    from ._progress import ProgressBar

__all__ = ["Screen"]


def _terminal(stream: TextIO) -> bool:
    return stream.isatty() and os.environ.get("TERM", "") != "dumb"


class Screen:
    """The forms, progress and log handlers and result printer for one command."""

    def __init__(self, console: StdConsole, *, interactive: bool, rich_output: bool) -> None:
        self.console = console
        self.interactive = interactive
        self.rich_output = rich_output
        self.bar: ProgressBar | None = None
        if interactive:  # rich and prompt_toolkit load only for a person at a terminal
            from rich.console import Console

            from ._progress import ProgressBar

            self.bar = ProgressBar(Console(file=sys.stderr, highlight=False))

    @classmethod
    def detect(cls, console: StdConsole) -> Screen:
        """Look at stdin, stdout, stderr and TERM."""
        return cls(console, interactive=_terminal(sys.stdin) and _terminal(sys.stderr),
                   rich_output=_terminal(sys.stdout))

    @property
    def progress(self) -> ProgressHandler | None:
        """The progress bar, or None (no progress token asked) when nobody watches."""
        return self.bar

    def log(self, params: LoggingMessageNotificationParams) -> None:
        """Show one of the server's log messages on stderr (a LogHandler)."""
        line = log_line(params)
        if self.bar is None:
            self.console.write(line)
            return
        from rich.text import Text

        self.bar.console.print(Text(line))  # above the live bar, if one is drawn

    def forms(self, *, server: str) -> TerminalForms:
        """prompt_toolkit forms at a terminal, else line input."""
        if not self.interactive:
            return TerminalForms(self.console, server=server)
        from ._forms_prompt import PromptForms  # prompt_toolkit loads only when it is used

        return PromptForms(self.console, server=server, before_ask=self.close)

    def show(self, result: object) -> None:
        """Print a result on stdout for a person to read."""
        self.close()
        if not self.rich_output:
            print(render(result))
            return
        from rich.console import Console

        from ._render_rich import show

        show(result, Console(highlight=False))

    def close(self) -> None:
        """Take the progress bar off the screen (its last frame stays)."""
        if self.bar is not None:
            self.bar.close()
