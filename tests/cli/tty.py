"""`mrtr` in a real pseudo-terminal (pexpect), its screen read back through a terminal emulator
(pyte), and the screens kept in docs/cli.md checked against the program as it runs now."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pexpect  # type: ignore[import-untyped]
import pyte  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[2]
CLI_MD = ROOT / "docs" / "cli.md"
LAUNCH = "import sys; from mrtr.cli import main; sys.exit(main())"
SERVER = f"{sys.executable} -m mrtr.cli serve tests.cli.app:app --stdio"
UPDATE = "MRTR_UPDATE_CAPTURES"
# A capture in docs/cli.md: <!-- capture: NAME --> then a ```text fence holding the screen.
CAPTURE = re.compile(
    r"<!-- capture: (?P<name>[\w-]+) -->\n```text\n(?P<screen>.*?)```\n", re.DOTALL)
KEYS = {"enter": "\r", "down": "\x1b[B", "up": "\x1b[A", "ctrl-x": "\x18", "ctrl-c": "\x03",
        "ctrl-u": "\x15"}


class Tty:
    """`mrtr ARGS` on a ROWS x COLS terminal; `screen` is what a person would see."""

    def __init__(self, *args: str, rows: int = 40, cols: int = 80) -> None:
        env = {**os.environ, "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1"}
        for name in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES"):
            env.pop(name, None)
        self.child = pexpect.spawn(sys.executable, ["-c", LAUNCH, *args], cwd=str(ROOT), env=env,
                                   encoding="utf-8", timeout=30, dimensions=(rows, cols))
        self.term = pyte.Screen(cols, rows)
        self.stream = pyte.Stream(self.term)

    @property
    def screen(self) -> str:
        lines = [line.rstrip() for line in self.term.display]
        return "\n".join(lines).strip("\n") + "\n"

    def _pump(self, wait: float) -> bool:
        """Feed what the program wrote within `wait` seconds to the emulator; False at its end."""
        try:
            self.stream.feed(self.child.read_nonblocking(65536, timeout=wait))
        except pexpect.TIMEOUT:
            pass
        except pexpect.EOF:
            return False
        return True

    def wait_for(self, text: str, timeout: float = 30.0, then: str | None = None) -> None:
        """Read until `text` is on the screen (and the program is quiet for a moment).

        With `then`, that text must be on the same screen as `text`, at some moment.
        """
        deadline = time.monotonic() + timeout
        while text not in self.screen or (then is not None and then not in self.screen):
            if not self._pump(0.05) or time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never showed; the screen:\n{self.screen}")
        if then is None:
            self.settle()

    def settle(self) -> None:
        """Read until the program has written nothing for 0.3 s."""
        before = None
        while before != self.screen and self._pump(0.3):
            before = self.screen

    def press(self, *keys: str) -> None:
        """Type text or named keys (`enter`, `down`, `ctrl-x`, ...), one after another."""
        for key in keys:
            self.child.send(KEYS.get(key, key))
            self.settle()

    def finish(self) -> int:
        """Wait for the program to exit; its exit status."""
        while self._pump(1.0):
            pass
        self.child.close()
        status: int = self.child.exitstatus
        return status


def captures(markdown: str) -> dict[str, str]:
    return {m["name"]: m["screen"] for m in CAPTURE.finditer(markdown)}


def check_capture(name: str, screen: str) -> None:
    """The screen `name` in docs/cli.md is `screen`; with MRTR_UPDATE_CAPTURES=1, make it so."""
    text = CLI_MD.read_text()
    if os.environ.get(UPDATE) == "1":
        block = f"<!-- capture: {name} -->\n```text\n{screen}```\n"
        match = next((m for m in CAPTURE.finditer(text) if m["name"] == name), None)
        assert match is not None, f"add <!-- capture: {name} --> and an empty ```text fence"
        CLI_MD.write_text(text[:match.start()] + block + text[match.end():])
        return
    assert captures(text).get(name) == screen, (
        f"docs/cli.md shows another screen for {name!r}: rerun with {UPDATE}=1")
