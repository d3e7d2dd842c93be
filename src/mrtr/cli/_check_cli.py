"""`mrtr check URL` / `mrtr check --stdio CMD`: audit a server for the stateless rules."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mrtr.check import Options, as_json, as_junit, as_sarif, as_table, plan, profile_names, run
from mrtr.check._rules import RULES

__all__ = ["register"]

_EPILOG = """exit status: 0 no rule failed (with --fail-on warn: nothing failed or warned),
1 a rule failed (or warned, with --fail-on warn), 2 usage error, 3 the server could not be
reached or its command did not start.
Tools are only called with --call-tools or --allow-tool NAME: calling a tool can have side
effects. Rules and fixes: docs/check.md."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = subparsers.add_parser(
        "check", help="audit an MCP server for the 2026-07-28 stateless rules",
        description="Audit an MCP server (HTTP URL or stdio command) for result shapes, sealed "
                    "requestState, statelessness and transport rules.", epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("target", help="the server's MCP endpoint URL, or with --stdio a command")
    check.add_argument("--stdio", action="store_true", help="TARGET is a command to spawn")
    check.add_argument("--replica", action="append", default=[], metavar="URL",
                       help="send later rounds to this replica too (repeatable)")
    check.add_argument("--call-tools", action="store_true", help="call every listed tool")
    check.add_argument("--allow-tool", action="append", default=[], metavar="NAME",
                       help="call this tool (repeatable)")
    check.add_argument("--answers", type=Path, metavar="FILE",
                       help="JSON object: input request key -> the response to send")
    check.add_argument("--args", type=Path, metavar="FILE",
                       help="JSON object: tool name -> the arguments to call it with")
    check.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                       help="wait this long, then re-send a state to test expiry")
    check.add_argument("--only", action="append", default=[], metavar="RULE",
                       help="run only these rules or groups (e.g. sealed, transport.origin)")
    check.add_argument("--skip", action="append", default=[], metavar="RULE")
    check.add_argument("--max-requests", type=int, default=300)
    check.add_argument("--max-tools", type=int, default=30, help="call at most this many tools")
    check.add_argument("--seconds", type=float, default=120.0, help="time budget of the run")
    check.add_argument("--timeout", type=float, default=10.0, help="per request, in seconds")
    check.add_argument("--effects-probe", default="", metavar="TOOL",
                       help="a read-only tool returning a count of effects (e.g. bookings): "
                            "read before and after a replay to tell a re-run from a stored "
                            "outcome")
    check.add_argument("--client-profile", action="append", default=[], metavar="NAME",
                       choices=profile_names(),
                       help="replay a known client's behaviour (repeatable): "
                            + ", ".join(profile_names()))
    check.add_argument("--fail-on", choices=("fail", "warn"), default="fail",
                       help="exit 1 on a FAIL (default) or on a WARN too")
    check.add_argument("--get-timeout", type=float, default=2.0, metavar="SECONDS",
                       help="how long the GET probe waits (a stream held open is a WARN)")
    check.add_argument("--format", choices=("table", "json", "sarif", "junit"),
                       default="table")
    check.add_argument("--json", dest="format", action="store_const", const="json",
                       help="same as --format json")
    check.add_argument("-v", "--verbose", action="store_true",
                       help="table: one line per finding, not one per rule")
    check.add_argument("--output", type=Path, metavar="FILE", help="write the report here")
    check.add_argument("--sarif", type=Path, metavar="FILE",
                       help="also write a SARIF 2.1.0 report here")
    check.add_argument("--junit", type=Path, metavar="FILE",
                       help="also write a JUnit XML report here")
    check.add_argument("--dry-run", action="store_true", help="list what would be sent")
    check.set_defaults(run=_run_check)


def _load(path: Path | None, what: str, parser_error: Any) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        parser_error(f"--{what}: cannot read {path}: {exc}")
    if not isinstance(value, dict):
        parser_error(f"--{what}: {path} must hold a JSON object")
    return dict(value)


def _usage(message: str) -> None:
    print(f"mrtr check: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _options(args: argparse.Namespace) -> Options:
    known = {r.id for r in RULES} | {r.id.split(".")[0] for r in RULES}
    for pattern in args.only + args.skip:
        if pattern.rstrip(".") not in known:
            _usage(f"unknown rule or group {pattern!r} (see docs/check.md)")
    if not args.stdio and not args.target.startswith(("http://", "https://")):
        _usage(f"{args.target!r} is not an http(s) URL (use --stdio for a command)")
    numbers = (args.max_requests, args.max_tools + 1, args.seconds, args.timeout, args.wait + 1,
               args.get_timeout)
    if min(numbers) <= 0 or args.wait < 0:
        _usage("--max-requests, --seconds and --timeout must be positive, --wait not negative")
    return Options(target=args.target, stdio=args.stdio, replicas=args.replica,
                   call_tools=args.call_tools, allow_tools=args.allow_tool,
                   answers=_load(args.answers, "answers", _usage),
                   arguments=_load(args.args, "args", _usage), wait=args.wait,
                   only=args.only, skip=args.skip, max_requests=args.max_requests,
                   max_tools=args.max_tools,
                   seconds=args.seconds + args.wait, timeout=args.timeout,
                   effects_probe=args.effects_probe, profiles=args.client_profile,
                   get_timeout=args.get_timeout)


def _run_check(args: argparse.Namespace) -> int:
    options = _options(args)
    if args.dry_run:
        for rule_id, sends in plan(options):
            print(f"{rule_id}: {sends}")
        print(f"at most {options.max_requests} requests in {options.seconds:g} s")
        return 0
    report = asyncio.run(run(options))
    formats = {"json": as_json, "sarif": as_sarif, "junit": as_junit}
    text = (as_table(report, verbose=args.verbose) if args.format == "table"
            else formats[args.format](report))
    for path, extra in ((args.sarif, as_sarif), (args.junit, as_junit)):
        if path is not None:
            path.write_text(extra(report) + "\n")
    if args.output is not None:
        args.output.write_text(text + "\n")
        if args.format != "table":
            print(as_table(report), file=sys.stderr)
    else:
        print(text)
    return report.exit_code(args.fail_on)
