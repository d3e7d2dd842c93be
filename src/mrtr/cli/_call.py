"""`mrtr call|tools|prompts|resources|read|prompt`: the terminal MCP client."""

# Design: every subcommand takes the server as a URL (Streamable HTTP) or `--stdio 'CMD'`, builds
# one Client whose handlers are terminal ones (`_forms_tui`), runs one coroutine and prints the
# result as text or, with `--json`, as the raw wire JSON on stdout. Prompts go to stderr.
from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import msgspec
from msgspec.structs import replace

from mrtr.client import Client, ClientError, Handlers, TransportError
from mrtr.client._client import DEFAULT_TIMEOUT
from mrtr.client.transports._http import HTTPTransport
from mrtr.client.transports._stdio import TAIL, ServerExited, StdioTransport
from mrtr.errors import MethodNotFound, ProtocolError
from mrtr.protocol import UNSET, CallToolResult, Root

from ._auth_args import add_auth_options, auth_from
from ._call_args import check_sampler, check_url, is_url, no_more, parse_arguments
from ._escape import escape, escape_json
from ._forms_tui import StdConsole, TerminalSampler
from ._render import LEVELS
from ._screen import Screen
from ._task_status import TaskStatusLine, run_interruptible

__all__ = ["parse_arguments", "register"]

Command = Callable[[Client, argparse.Namespace, list[str]], Awaitable[object]]
Failure = ValueError | ProtocolError | ClientError | TransportError | TimeoutError


async def _call(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    if not rest:
        raise ValueError("usage: mrtr call TARGET TOOL [key=value ...]")
    parse_arguments(rest[1:])  # usage errors before anything is sent
    try:
        tools = await client.list_tools()
    except ProtocolError:  # no list, no schema: the values are read as JSON when they parse
        tools = []
    schema = next((t.input_schema for t in tools if t.name == rest[0]), None)
    arguments = parse_arguments(rest[1:], schema=schema)
    status = TaskStatusLine()  # a task's progress on stderr (stdout stays for the result)
    try:
        return await client.call_tool(rest[0], arguments, progress=args.screen.progress,
                                      on_task=status)
    finally:
        status.close()


async def _prompt(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    if not rest:
        raise ValueError("usage: mrtr prompt TARGET NAME [key=value ...]")
    strings = {k: str(v) for k, v in parse_arguments(rest[1:], as_json=False).items()}
    return await client.get_prompt(rest[0], strings)


async def _read(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    if not rest:
        raise ValueError("usage: mrtr read TARGET URI")
    no_more(rest[1:], "mrtr read TARGET URI")
    return await client.read_resource(rest[0])


async def _resources(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    no_more(rest, "mrtr resources TARGET")
    return [*await _listed(client.list_resources()),
            *await _listed(client.list_resource_templates())]


async def _tools(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    no_more(rest, "mrtr tools TARGET")
    return await client.list_tools()


async def _prompts(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    no_more(rest, "mrtr prompts TARGET")
    return await _listed(client.list_prompts())


async def _listed(listing: Awaitable[Sequence[object]]) -> list[object]:
    """The items listed; none when the server does not serve that list at all (-32601)."""
    try:
        return list(await listing)
    except MethodNotFound:
        return []


class _Spec(NamedTuple):
    run: Command
    summary: str
    arguments: str  # after the target, in the usage line
    example: str  # after `mrtr NAME http://127.0.0.1:8000/mcp`
    rounds: bool  # may ask questions (MRTR): --max-rounds, --sampler, --root apply


_COMMANDS: dict[str, _Spec] = {
    "call": _Spec(_call, "call a tool, answering its questions in the terminal",
                  "TOOL [key=value ...]", "book_return order_id=A-1001", True),
    "tools": _Spec(_tools, "list the tools", "", "--json", False),
    "prompts": _Spec(_prompts, "list the prompts", "", "", False),
    "resources": _Spec(_resources, "list the resources and resource templates", "", "", False),
    "read": _Spec(_read, "read a resource", "URI", "brightgrid://policy", True),
    "prompt": _Spec(_prompt, "get a prompt", "NAME [key=value ...]", "welcome name=Ann", True),
}
_HINT_PROBE = 5.0  # seconds the --mode modern hint waits for server/discover
_EPILOG = """examples:
  mrtr {name} http://127.0.0.1:8000/mcp {example}
  mrtr {name} --stdio 'python -m mrtr serve app:app --stdio' {example}
{values}
exit status: 0 a result, 1 a failure (tool error, server error, timeout), 2 a usage error{declined}
"""
_VALUES = """
values are JSON when they parse (n=3, ok=true), else text (team=red); a parameter typed as
text keeps what you typed (code=0123, team=null); quote to force text: code='"123"'
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the client subcommands to the `mrtr` parser (each sets `run`)."""
    for name, spec in _COMMANDS.items():
        args = f" {spec.arguments}" if spec.arguments else ""
        sub = subparsers.add_parser(
            name, help=spec.summary, description=spec.summary,
            usage=f"mrtr {name} URL{args} [options]\n       mrtr {name} --stdio CMD{args} "
                  "[options]",
            epilog=_EPILOG.format(
                name=name, example=spec.example, values=_VALUES if name == "call" else "",
                declined=", 3 you declined a question" if name == "call" else ""),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _options(sub, rounds=spec.rounds)
        sub.set_defaults(run=_runner(spec.run))


def _options(sub: argparse.ArgumentParser, *, rounds: bool) -> None:
    sub.add_argument("items", nargs="*", metavar="ARG",
                     help="the server URL (none with --stdio), then the command's arguments")
    sub.add_argument("--stdio", metavar="CMD", help="run the server as a subprocess")
    sub.add_argument("--server-log", action="store_true",
                     help="show the --stdio server's stderr as it runs (else only its last "
                          "lines, if it exits)")
    sub.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                     help="extra HTTP header (repeatable)")
    sub.add_argument("--json", action="store_true", help="print raw JSON (errors too)")
    sub.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                     help="deadline for the whole command, answers included "
                          f"(default {DEFAULT_TIMEOUT:g}; 0 for none)")
    sub.add_argument("--mode", choices=("auto", "modern", "legacy"), default="auto",
                     help="auto: probe for 2026-07-28, else initialize (MCP 2025); "
                          "modern/legacy: skip the probe (default auto)")
    add_auth_options(sub)
    if not rounds:
        sub.set_defaults(max_rounds=10, sampler=None, root=[], logs="off")
        return
    # dest `logs`: `log_level` is this process's own logging level (mrtr.cli.main).
    sub.add_argument("--log-level", dest="logs", choices=(*LEVELS, "off"), default="info",
                     help="show the server's log messages at this level and above on stderr "
                          "(default info; off: ask for none)")
    sub.add_argument("--max-rounds", type=int, default=10, metavar="N",
                     help="MRTR round cap (default 10)")
    sub.add_argument("--sampler", metavar="CMD",
                     help="answer sampling by piping the prompt to CMD (else you type it)")
    sub.add_argument("--root", action="append", default=[], metavar="PATH",
                     help="expose PATH as a root (repeatable)")


def _runner(command: Command) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        # A plain loop (not asyncio.run) keeps Ctrl-C a KeyboardInterrupt inside input prompts.
        loop = asyncio.new_event_loop()
        try:
            return run_interruptible(loop, _main(command, args))  # Ctrl-C cancels a task
        finally:  # as asyncio.run: a stream read to its reply is closed here, not at exit
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            if isinstance(getattr(args, "screen", None), Screen):
                args.screen.close()  # after Ctrl-C too: the progress bar gives the cursor back

    return run


async def _main(command: Command, args: argparse.Namespace) -> int:
    items: list[str] = list(args.items)
    console = StdConsole()
    args.screen = screen = Screen.detect(console)
    hint: str | None = None
    try:
        client = _client(args, items, console)
        async with client:
            try:
                result = await command(client, args, items)
            except (ProtocolError, TransportError):
                hint = await _era_hint(client, args.mode)
                raise
    except (ValueError, ProtocolError, ClientError, TransportError, TimeoutError) as exc:
        screen.close()
        status = _report(exc, console, as_json=args.json)
        if hint is not None:
            console.write(hint)
        return status
    failed = getattr(result, "is_error", UNSET) is True
    refused = getattr(client.handlers.elicitation, "refused", None)
    if failed and refused is not None and isinstance(result, CallToolResult):
        # The tool stopped because the user said no: a choice, not a tool failure.
        _print(replace(result, is_error=UNSET), args)
        verb = "declined" if refused == "decline" else "cancelled"
        console.write(f"mrtr: you {verb} a question, so the tool stopped")
        return 3
    _print(result, args)
    return 1 if failed else 0


async def _era_hint(client: Client, mode: str) -> str | None:
    """With --mode modern, a hint to try auto when the server does not answer discover."""
    if mode != "modern":
        return None
    try:
        async with asyncio.timeout(_HINT_PROBE):
            await client.discover()  # every 2026-07-28 server answers it
    except (ProtocolError, ClientError, TransportError, TimeoutError):
        return ("mrtr: the server does not answer server/discover, so it may speak only MCP "
                "2025 (initialize): try --mode auto")
    return None


def _print(result: object, args: argparse.Namespace) -> None:
    args.screen.close()
    if args.json:
        print(_json(result))
    else:
        args.screen.show(result)


def _report(exc: Failure, console: StdConsole, *, as_json: bool) -> int:
    """Write why the command failed (stderr; also JSON on stdout with --json); its exit status."""
    lines = _explain(exc)
    for line in lines:
        console.write(line)
    if as_json:
        error: dict[str, object] = {"message": "\n".join(lines).removeprefix("mrtr: ")}
        if isinstance(exc, ProtocolError):
            error = {"code": exc.code, "message": exc.message, **_data(exc.data)}
        print(_json({"error": error}))
    return 2 if isinstance(exc, ValueError) else 1


def _explain(exc: Failure) -> list[str]:
    """The lines on stderr for a failure (server text escaped, one line each)."""
    if isinstance(exc, ValueError):
        return [f"mrtr: {exc}"]
    if isinstance(exc, ProtocolError):
        return [f"mrtr: server error {exc.code}: {escape(str(exc), newlines=False)}"]
    if isinstance(exc, ServerExited):
        tail = [f"  {escape(line, newlines=False)}" for line in exc.stderr_tail]
        return [f"mrtr: the server exited with code {exc.code}"
                + ("; the end of its stderr:" if tail else ""), *tail]
    if isinstance(exc, TimeoutError):
        return [f"mrtr: timed out: {exc}" if str(exc) else "mrtr: timed out"]
    return [f"mrtr: {escape(str(exc), newlines=False)}"]


def _data(data: object) -> dict[str, object]:
    return {} if data is None else {"data": data}


def _json(value: object) -> str:
    return escape_json(msgspec.json.format(msgspec.json.encode(value), indent=2).decode("utf-8"))


def _client(args: argparse.Namespace, items: list[str], console: StdConsole) -> Client:
    """Build the Client; consumes the URL from `items` unless --stdio is given.

    Raises ValueError for a usage error (nothing is started yet).
    """
    if args.stdio:
        if items and is_url(items[0]):
            raise ValueError("give the server URL or --stdio 'CMD', not both")
        stderr = None if args.server_log else TAIL
        transport: HTTPTransport | StdioTransport = StdioTransport(args.stdio, stderr=stderr)
        server = "The server"
    else:
        if not items:
            raise ValueError("give the server URL (http://HOST:PORT/PATH) or --stdio 'CMD'")
        url = check_url(items.pop(0))
        transport = HTTPTransport(url, headers=_headers(args.header), auth=auth_from(args, url))
        server = url
    check_sampler(args.sampler)
    roots = [Root(uri=Path(p).resolve().as_uri(), name=Path(p).resolve().name)
             for p in args.root]
    handlers = Handlers(
        elicitation=args.screen.forms(server=server), url=True,
        sampling=TerminalSampler(console, command=args.sampler),
        roots=roots or None,
    )
    timeout = args.timeout if args.timeout > 0 else None
    logs = args.logs != "off"
    return Client(transport, handlers=handlers, max_rounds=args.max_rounds, timeout=timeout,
                  mode=args.mode, on_log=args.screen.log if logs else None,
                  log_level=args.logs if logs else "info")


def _headers(values: Sequence[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"expected 'NAME: VALUE', got {value!r}")
        headers[name.strip()] = rest.strip()
    return headers
