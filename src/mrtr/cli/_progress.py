"""A progress bar on stderr for long calls, drawn by rich from `notifications/progress`."""

# Design: the bar appears with the first notification only (short calls show nothing), is taken
# off the live display before a form asks anything (a prompt and a live bar would fight over the
# cursor), and a later notification starts a fresh one. The server's message is escaped and
# shown as plain text, never as rich markup. No clock column: the final frame is the same for
# every run, so the captures in docs/cli.md stay true.
from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn

from ._escape import escape

__all__ = ["ProgressBar"]


class ProgressBar:
    """A ProgressHandler (`progress, total, message`) drawing one bar on `console`."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __call__(self, progress: float, total: float | None, message: str | None, /) -> None:
        if self._bar is None or self._task is None:
            self._bar = Progress(
                TextColumn("{task.description}", markup=False), BarColumn(),
                TaskProgressColumn(), TextColumn("{task.fields[count]}", markup=False),
                console=self.console, transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task("working", total=None, count="")
        count = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
        description = escape(message, newlines=False) if message else "working"
        self._bar.update(self._task, completed=progress, total=total, count=count,
                         description=description)

    def close(self) -> None:
        """Draw the last frame and take the bar off the live display."""
        if self._bar is not None:
            self._bar.stop()
        self._bar = self._task = None
