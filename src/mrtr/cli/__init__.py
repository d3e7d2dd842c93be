"""The `mrtr` command line: each subcommand lives in its own module and registers itself."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence

__all__ = ["build_parser", "main"]

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

# Design: a subcommand module exposes `register(subparsers)`, which adds its parser and sets
# `run=<callable(args) -> int>` as a default; main() only dispatches. main() imports just the
# module of the command it runs, so `mrtr serve` never loads the client stack (httpx, pygments)
# and each server worker stays small. New modules join MODULES and COMMANDS.
MODULES = ("mrtr.cli._serve_cli", "mrtr.cli._call", "mrtr.cli._dev", "mrtr.cli._install",
           "mrtr.cli._check_cli", "mrtr.cli._tasks_cli", "mrtr.cli._store_cli")
COMMANDS = {
    "dev": "mrtr.cli._dev",
    "install": "mrtr.cli._install",
    "serve": "mrtr.cli._serve_cli",
    "keys": "mrtr.cli._serve_cli",
    "check": "mrtr.cli._check_cli",
    **dict.fromkeys(("call", "tools", "prompts", "resources", "read", "prompt"), "mrtr.cli._call"),
    "tasks": "mrtr.cli._tasks_cli",
    "store": "mrtr.cli._store_cli",
}


def registrars(argv: Sequence[str] | None = None) -> list[Register]:
    """The `register` functions for the command in `argv` (all of them when it names none)."""
    command = next((arg for arg in argv or () if not arg.startswith("-")), None)
    names = [COMMANDS[command]] if command in COMMANDS else MODULES
    return [importlib.import_module(name).register for name in names]


def build_parser(regs: Sequence[Register] | None = None) -> argparse.ArgumentParser:
    """Return the `mrtr` parser with the given subcommands (default: every one)."""
    parser = argparse.ArgumentParser(prog="mrtr", description="MCP 2026-07-28 (MRTR) toolkit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in registrars() if regs is None else regs:
        register(subparsers)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """parse_args, except that leftovers are reported by the subcommand, with its usage."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        _subparser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _subparser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The innermost subcommand parser `args` went through (`mrtr keys generate`: generate)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            if chosen in action.choices:
                return _subparser(action.choices[chosen], args)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `mrtr` command; returns the exit status (2 for usage errors)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parse(build_parser(registrars(argv)), argv)
    level = getattr(args, "log_level", "warning").upper()
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="%(levelname)s %(name)s: %(message)s")
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130
