"""The `mrtr` command line: each subcommand lives in its own module and registers itself."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from mrtr.cli import _call, _serve_cli

__all__ = ["main"]

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

# Design: a subcommand module exposes `register(subparsers)`, which adds its parser and sets
# `run=<callable(args) -> int>` as a default; main() only dispatches. New modules join this tuple.
REGISTRARS: tuple[Register, ...] = (_serve_cli.register, _call.register)


def build_parser(registrars: Sequence[Register] = REGISTRARS) -> argparse.ArgumentParser:
    """Return the `mrtr` parser with every registered subcommand."""
    parser = argparse.ArgumentParser(prog="mrtr", description="MCP 2026-07-28 (MRTR) toolkit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in registrars:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `mrtr` command; returns the exit status (2 for usage errors)."""
    args = build_parser().parse_args(argv)
    level = getattr(args, "log_level", "warning").upper()
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="%(levelname)s %(name)s: %(message)s")
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130
