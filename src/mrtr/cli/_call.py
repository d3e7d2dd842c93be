"""`mrtr call|tools|prompts|resources|read|prompt`: the terminal MCP client."""

# Design: every subcommand takes the server as a URL (Streamable HTTP) or `--stdio 'CMD'`, builds
# one Client whose handlers are terminal ones (`_forms_tui`), runs one coroutine and prints the
# result as text or, with `--json`, as the raw wire JSON on stdout. Prompts go to stderr.
from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import msgspec

from mrtr.client import Client, ClientError, Handlers, TransportError
from mrtr.client._client import DEFAULT_TIMEOUT
from mrtr.errors import ProtocolError
from mrtr.protocol import UNSET, Root
from mrtr.transports._http_client import HTTPTransport
from mrtr.transports._stdio_client import StdioTransport

from ._escape import escape, escape_json
from ._forms_tui import StdConsole, TerminalForms, TerminalSampler
from ._render import render

__all__ = ["parse_arguments", "register"]

Command = Callable[[Client, argparse.Namespace, list[str]], Awaitable[object]]


def parse_arguments(pairs: Sequence[str], *, as_json: bool = True) -> dict[str, object]:
    """`key=value` pairs to arguments; values are JSON when they parse (unless `as_json=False`).

    Raises ValueError for an item without `=`.
    """
    arguments: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        parsed: object = value
        if as_json:
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = value
        arguments[key] = parsed
    return arguments


async def _call(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    if not rest:
        raise ValueError("usage: mrtr call TARGET TOOL [key=value ...]")
    return await client.call_tool(rest[0], parse_arguments(rest[1:]))


async def _prompt(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    if not rest:
        raise ValueError("usage: mrtr prompt TARGET NAME [key=value ...]")
    strings = {k: str(v) for k, v in parse_arguments(rest[1:], as_json=False).items()}
    return await client.get_prompt(rest[0], strings)


async def _read(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    if len(rest) != 1:
        raise ValueError("usage: mrtr read TARGET URI")
    return await client.read_resource(rest[0])


async def _resources(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    resources = await client.list_resources()
    try:
        templates = await client.list_resource_templates()
    except ProtocolError:
        templates = []
    return [*resources, *templates]


async def _tools(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    return await client.list_tools()


async def _prompts(client: Client, args: argparse.Namespace, rest: list[str]) -> object:
    return await client.list_prompts()


_COMMANDS: dict[str, tuple[Command, str]] = {
    "call": (_call, "call a tool, answering its questions in the terminal"),
    "tools": (_tools, "list the tools"),
    "prompts": (_prompts, "list the prompts"),
    "resources": (_resources, "list the resources and resource templates"),
    "read": (_read, "read a resource"),
    "prompt": (_prompt, "get a prompt"),
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the client subcommands to the `mrtr` parser (each sets `run`)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("items", nargs="*", metavar="TARGET ...",
                        help="the server URL (omit with --stdio), then the command's arguments")
    common.add_argument("--stdio", metavar="CMD", help="run the server as a subprocess")
    common.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                        help="extra HTTP header (repeatable)")
    common.add_argument("--json", action="store_true", help="print raw JSON results")
    common.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help="deadline for the whole call, answers included "
                             f"(default {DEFAULT_TIMEOUT:g}; 0 for none)")
    common.add_argument("--max-rounds", type=int, default=10, help="MRTR round cap (default 10)")
    common.add_argument("--sampler", metavar="CMD",
                        help="answer sampling by piping the prompt to CMD (else you type it)")
    common.add_argument("--root", action="append", default=[], metavar="PATH",
                        help="expose PATH as a root (repeatable)")
    common.add_argument("--server-log", action="store_true",
                        help="show the --stdio server's stderr")
    common.add_argument("--mode", choices=("auto", "modern", "legacy"), default="auto",
                        help="auto: probe for 2026-07-28, else initialize (MCP 2025); "
                             "modern/legacy: skip the probe (default auto)")
    for name, (command, summary) in _COMMANDS.items():
        sub = subparsers.add_parser(name, parents=[common], help=summary, description=summary)
        sub.set_defaults(run=_runner(command))


def _runner(command: Command) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        # A plain loop (not asyncio.run) keeps Ctrl-C a KeyboardInterrupt inside input prompts.
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(_main(command, args))
        finally:
            loop.close()

    return run


async def _main(command: Command, args: argparse.Namespace) -> int:
    items: list[str] = list(args.items)
    console = StdConsole()
    try:
        client = _client(args, items, console)
    except ValueError as exc:
        console.write(f"mrtr: {exc}")
        return 2
    try:
        async with client:
            result = await command(client, args, items)
    except ValueError as exc:
        console.write(f"mrtr: {exc}")
        return 2
    except ProtocolError as exc:
        console.write(f"mrtr: server error {exc.code}: {escape(exc.message, newlines=False)}")
        return 1
    except (ClientError, TransportError) as exc:
        console.write(f"mrtr: {escape(str(exc), newlines=False)}")
        return 1
    except TimeoutError as exc:
        console.write(f"mrtr: timed out: {exc}" if str(exc) else "mrtr: timed out")
        return 1
    if args.json:
        text = msgspec.json.format(msgspec.json.encode(result), indent=2).decode("utf-8")
        print(escape_json(text))
    else:
        print(render(result))
    return 1 if getattr(result, "is_error", UNSET) is True else 0


def _client(args: argparse.Namespace, items: list[str], console: StdConsole) -> Client:
    """Build the Client; consumes the URL from `items` unless --stdio is given."""
    if args.stdio:
        stderr = None if args.server_log else subprocess.DEVNULL
        transport: HTTPTransport | StdioTransport = StdioTransport(args.stdio, stderr=stderr)
        server = "The server"
    else:
        if not items:
            raise ValueError("give a server URL or --stdio 'CMD'")
        url = items.pop(0)
        transport = HTTPTransport(url, headers=_headers(args.header))
        server = url
    roots = [Root(uri=Path(p).resolve().as_uri(), name=Path(p).resolve().name)
             for p in args.root]
    handlers = Handlers(
        elicitation=TerminalForms(console, server=server), url=True,
        sampling=TerminalSampler(console, command=args.sampler),
        roots=roots or None,
    )
    timeout = args.timeout if args.timeout > 0 else None
    return Client(transport, handlers=handlers, max_rounds=args.max_rounds, timeout=timeout,
                  mode=args.mode)


def _headers(values: Sequence[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"expected 'NAME: VALUE', got {value!r}")
        headers[name.strip()] = rest.strip()
    return headers
