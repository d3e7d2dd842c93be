"""The status line `mrtr call` shows on stderr while it polls a task, and Ctrl-C for tasks."""

# Design: on a terminal one line is redrawn in place (spinner, task id, status, message) and
# wiped before anything else is written (a question of the task, the result, an error); when
# stderr is not a terminal (a log, CI) each change of status or message is one plain line, so
# nothing is overwritten and nothing repeats. Server text is escaped like any other (`_escape`).
# Ctrl-C while the loop waits cancels the main coroutine instead of killing the loop, so the
# Client's clean-up runs and a live task gets its `tasks/cancel`.
from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
from collections.abc import Coroutine
from typing import TextIO, TypeVar

from mrtr.protocol import UNSET, Task

from ._escape import escape

__all__ = ["TaskStatusLine", "run_interruptible"]

T = TypeVar("T")
_FRAMES_UTF8 = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_FRAMES_ASCII = "|/-\\"
_WIPE = "\r\x1b[K"


class TaskStatusLine:
    """A `TaskObserver` drawing the task's state on `stream` (default stderr).

    `tty` overrides `stream.isatty()`; `tick` is the spinner period in seconds. Call `close()`
    when the call ends (it wipes the line).
    """

    def __init__(
        self, stream: TextIO | None = None, *, tty: bool | None = None, tick: float = 0.1
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.tick = tick
        encoding = (getattr(self.stream, "encoding", None) or "").lower().replace("-", "")
        self._frames = _FRAMES_UTF8 if encoding == "utf8" else _FRAMES_ASCII
        self._frame = 0
        self._text = ""
        self._last: tuple[str, str] | None = None
        self._shown = False
        self._ticker: asyncio.Task[None] | None = None

    def __call__(self, task: Task) -> None:
        message = task.status_message if task.status_message is not UNSET else ""
        text = escape(f"task {task.task_id}: {task.status.replace('_', ' ')}"
                      + (f" - {message}" if message else ""), newlines=False)
        if not self.tty:
            if (task.status, message) != self._last:
                self._write(f"mrtr: {text}\n")
            self._last = (task.status, message)
            return
        if task.status != "working":  # a question or the end follows: leave the line clean
            self.close()
            return
        self._text = text
        self._draw()
        if self._ticker is None:
            with contextlib.suppress(RuntimeError):  # no running loop: no animation
                self._ticker = asyncio.get_running_loop().create_task(self._spin())

    def close(self) -> None:
        """Stop the spinner and wipe the line (on a terminal)."""
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._shown:
            self._write(_WIPE)
            self._shown = False

    def _draw(self) -> None:
        width = max(shutil.get_terminal_size().columns - 3, 10)
        self._write(f"{_WIPE}{self._frames[self._frame]} {self._text[:width]}")
        self._shown = True

    async def _spin(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            self._frame = (self._frame + 1) % len(self._frames)
            self._draw()

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def run_interruptible(loop: asyncio.AbstractEventLoop, main: Coroutine[object, object, T]) -> T:
    """Run `main` on `loop`; on Ctrl-C cancel it, let it clean up, and raise KeyboardInterrupt."""
    task = loop.create_task(main)
    try:
        return loop.run_until_complete(task)
    except KeyboardInterrupt:
        task.cancel()
        with contextlib.suppress(BaseException):
            loop.run_until_complete(task)
        raise
