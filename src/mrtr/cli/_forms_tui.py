"""Terminal input for `mrtr call`: elicitation forms, URL consent, typed or piped sampling."""

# Design: plain line input through a `Console` Protocol (so tests and other front ends can swap
# it), one prompt per field, re-prompting until the value fits the field's schema. `:decline` and
# `:cancel` work at every prompt; EOF and Ctrl-C cancel. The user reviews the answers before they
# are sent and may edit them (spec: client/elicitation, "review and edit"). Every text that came
# from the server goes through `_escape` before it reaches the terminal; only messages and
# sampling prompts keep their newlines (not in URL mode, where a message could fake the URL).
from __future__ import annotations

import asyncio
import json
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Protocol
from urllib.parse import urlsplit

from mrtr.client import InputRefused
from mrtr.protocol import (
    UNSET,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ElicitValue,
    TextContent,
)
from mrtr.protocol._formats import email_problem

from ._escape import escape, escape_url

__all__ = ["Console", "heading", "StdConsole", "TerminalForms", "TerminalSampler", "parse_field"]

_YES = frozenset({"y", "yes", "true", "1"})
_NO = frozenset({"n", "no", "false", "0"})


class Console(Protocol):
    """Line-based terminal I/O; `read` raises EOFError or KeyboardInterrupt to cancel."""

    def read(self, prompt: str) -> str: ...

    def write(self, text: str) -> None: ...


class StdConsole:
    """Prompts and messages on stderr (stdout stays for results), answers from stdin."""

    def read(self, prompt: str) -> str:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\r\n")

    def write(self, text: str) -> None:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


class _Stop(Exception):  # noqa: N818 - control flow: the user declined or cancelled
    def __init__(self, action: str) -> None:
        self.action = action


def _read(console: Console, prompt: str) -> str:
    try:
        text = console.read(prompt).strip()
    except (EOFError, KeyboardInterrupt):
        console.write("")
        raise _Stop("cancel") from None
    if text in (":decline", ":cancel"):
        raise _Stop(text[1:])
    return text


def _choices(prop: Mapping[str, object]) -> list[tuple[str, str]]:
    """(value, title) pairs of a single- or multi-select enum, else []."""
    source: Mapping[str, object] = prop
    items = prop.get("items")
    if prop.get("type") == "array" and isinstance(items, Mapping):
        source = items
    options = source.get("oneOf") or source.get("anyOf")
    if isinstance(options, list):
        return [(str(o.get("const")), str(o.get("title", o.get("const"))))
                for o in options if isinstance(o, Mapping)]
    values = source.get("enum")
    names = source.get("enumNames")
    if isinstance(values, list):
        titles = names if isinstance(names, list) and len(names) == len(values) else values
        return [(str(v), str(t)) for v, t in zip(values, titles, strict=True)]
    return []


def _pick(text: str, choices: list[tuple[str, str]]) -> str:
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1][0]
    for value, title in choices:
        if text in (value, title):
            return value
    raise ValueError("choose one of: " + ", ".join(v for v, _ in choices))


def _number(text: str, prop: Mapping[str, object], integer: bool) -> int | float:
    try:
        value: int | float = int(text) if integer or re.fullmatch(r"-?\d+", text) else float(text)
    except ValueError:
        raise ValueError("enter a whole number" if integer else "enter a number") from None
    low, high = prop.get("minimum"), prop.get("maximum")
    if isinstance(low, int | float) and value < low:
        raise ValueError(f"must be at least {low}")
    if isinstance(high, int | float) and value > high:
        raise ValueError(f"must be at most {high}")
    return value


def _string(text: str, prop: Mapping[str, object]) -> str:
    low, high, fmt = prop.get("minLength"), prop.get("maxLength"), prop.get("format")
    if isinstance(low, int) and len(text) < low:
        raise ValueError(f"must be at least {low} characters")
    if isinstance(high, int) and len(text) > high:
        raise ValueError(f"must be at most {high} characters")
    if fmt == "email" and (problem := email_problem(text)) is not None:
        raise ValueError(f"enter an email address: {problem}")
    if fmt == "uri" and not urlsplit(text).scheme:
        raise ValueError("enter a URI with a scheme (e.g. https://…)")
    try:
        if fmt == "date":
            date.fromisoformat(text)
        elif fmt == "date-time":
            datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"enter a {fmt} in ISO 8601 form") from None
    return text


def parse_field(prop: Mapping[str, object], text: str) -> ElicitValue:
    """Parse what the user typed for one field; raises ValueError with a message to show."""
    kind = prop.get("type")
    choices = _choices(prop)
    if kind == "array":
        picked = [_pick(part.strip(), choices) for part in text.split(",") if part.strip()]
        low, high = prop.get("minItems"), prop.get("maxItems")
        if isinstance(low, int) and len(picked) < low:
            raise ValueError(f"choose at least {low}")
        if isinstance(high, int) and len(picked) > high:
            raise ValueError(f"choose at most {high}")
        return picked
    if choices:
        return _pick(text, choices)
    if kind == "boolean":
        if text.lower() in _YES | _NO:
            return text.lower() in _YES
        raise ValueError("answer y or n")
    if kind in ("integer", "number"):
        return _number(text, prop, kind == "integer")
    return _string(text, prop)


def _line(value: object) -> str:
    return escape(str(value), newlines=False)


def heading(name: str, prop: Mapping[str, object]) -> str:
    """A field's title and description on one line (server text escaped)."""
    title = _line(prop.get("title") or name)
    return title + (f" - {_line(prop['description'])}" if prop.get("description") else "")


def _describe(name: str, prop: Mapping[str, object], required: bool) -> tuple[str, str]:
    """The heading line and the prompt for one field (server text escaped)."""
    heading_ = heading(name, prop)
    choices = _choices(prop)
    if choices:
        heading_ += "\n    " + "  ".join(f"{i}) {_line(t)}" for i, (_, t) in enumerate(choices, 1))
    kind = "choice" if choices and prop.get("type") != "array" else str(prop.get("type", "string"))
    if prop.get("type") == "array":
        kind = "choices, comma-separated"
    elif kind == "boolean":
        kind = "y/n"
    hints = [kind] + ([_line(prop["format"])] if "format" in prop else []) + _limits(prop)
    if "default" in prop:
        hints.append(f"default {_line(json.dumps(prop['default'], ensure_ascii=False))}")
    elif not required:
        hints.append("optional")
    return heading_, f"  {_line(name)} ({', '.join(hints)}): "


def _limits(prop: Mapping[str, object]) -> list[str]:
    """The field's constraints as hints, shown before the first answer: `1 to 5`, ..."""
    kind = prop.get("type")
    if kind in ("integer", "number"):
        span = _span(_bound(prop, "minimum", "exclusiveMinimum", ">"),
                     _bound(prop, "maximum", "exclusiveMaximum", "<"))
        return [span] if span else []
    if kind == "string":
        span = _span(_bound(prop, "minLength"), _bound(prop, "maxLength"))
        return [f"{span} characters"] if span else []
    if kind == "array":
        span = _span(_bound(prop, "minItems"), _bound(prop, "maxItems"))
        return [f"pick {span}"] if span else []
    return []


def _bound(prop: Mapping[str, object], key: str, exclusive: str = "", sign: str = "") -> str:
    """`5` for an inclusive bound, `> 5` for an exclusive one, "" for none."""
    for name, prefix in ((key, ""), (exclusive, sign + " ")):
        value = prop.get(name) if name else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return prefix + _line(json.dumps(value))
    return ""


def _span(low: str, high: str) -> str:
    """`1 to 5`, `at least 1`, `at most 5`, `> 0, < 1`, or "" without bounds."""
    exact = [bool(b) and not b.startswith(("<", ">")) for b in (low, high)]
    if all(exact):
        return f"{low} to {high}"
    words = [f"at least {low}" if exact[0] else low, f"at most {high}" if exact[1] else high]
    return ", ".join(w for w in words if w)


class TerminalForms:
    """An ElicitationHandler asking in the terminal (form and URL mode)."""

    def __init__(self, console: Console, *, server: str = "The server") -> None:
        self.console = console
        self.server = server
        self.refused: str | None = None  # "decline" or "cancel" once the user refused a form

    async def __call__(self, params: ElicitRequestParams, /) -> ElicitResult:
        try:
            if params.mode == "url":
                return self._url(params)
            return self._form(params)
        except _Stop as stop:
            return self._refuse(stop)

    def _refuse(self, stop: _Stop) -> ElicitResult:
        self.refused = stop.action
        self.console.write(f"  ({stop.action}d)" if stop.action == "decline" else "  (cancelled)")
        return ElicitResult(action="decline" if stop.action == "decline" else "cancel")

    def _show_url(self, params: ElicitRequestParams) -> str:
        """Write what the server asks and the URL it wants opened; the URL, escaped."""
        url = escape_url(params.url if params.url is not UNSET else "")
        out = self.console.write
        out(f"\n{self.server} asks: {escape(params.message, newlines=False)}")
        out(f"  It wants you to open this URL (host: {_host(url)}):\n    {url}")
        return url

    def _url(self, params: ElicitRequestParams) -> ElicitResult:
        url = self._show_url(params)
        out = self.console.write
        if _read(self.console, "  Open it? [y/N] ").lower() not in _YES:
            raise _Stop("decline")
        out(f"  Open it in your browser: {url}")
        return ElicitResult(action="accept")

    def _form(self, params: ElicitRequestParams) -> ElicitResult:
        schema = params.requested_schema if params.requested_schema is not UNSET else {}
        props = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        self.console.write(f"\n{self.server} asks: {escape(params.message)}")
        self.console.write("  (:decline to decline, :cancel to cancel)")
        values: dict[str, ElicitValue] = {}
        while True:
            for name, prop in props.items():
                self._field(values, name, prop, name in required)
            if len(props) < 2 or self._confirm(values):
                return ElicitResult(action="accept", content=values)
            self.console.write("  Edit the answers (Enter keeps the current value):")

    def _field(self, values: dict[str, ElicitValue], name: str, prop: Mapping[str, object],
               required: bool) -> None:
        heading, prompt = _describe(name, prop, required)
        self.console.write("  " + heading)
        current = values.get(name, prop.get("default"))
        if name in values:
            prompt = prompt[:-2] + f" [{_line(_show(current))}]: "
        while True:
            text = _read(self.console, prompt)
            if not text:
                if current is not None:
                    values[name] = current  # type: ignore[assignment]
                    return
                if not required:
                    values.pop(name, None)
                    return
                self.console.write("    ! a value is required")
                continue
            try:
                values[name] = parse_field(prop, text)
                return
            except ValueError as exc:
                self.console.write(f"    ! {_line(exc)}")

    def _confirm(self, values: Mapping[str, ElicitValue]) -> bool:
        summary = ", ".join(f"{k}={_show(v)}" for k, v in values.items())
        self.console.write(f"  Answers: {_line(summary)}")
        return _read(self.console, "  Send? [Y/n] ").lower() not in _NO


def _host(url: str) -> str:
    """The host of an (already escaped) URL, or why there is none."""
    try:
        return urlsplit(url).hostname or "none"
    except ValueError:
        return "invalid URL"


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


class TerminalSampler:
    """A SamplingHandler: pipe the prompt to `command`, or let the user type the reply."""

    def __init__(self, console: Console, *, command: str | None = None) -> None:
        self.console = console
        self.command = command

    async def __call__(self, params: CreateMessageRequestParams, /) -> CreateMessageResult:
        prompt = _render(params)
        self.console.write("\nThe server asks the model:\n" + _indent(escape(prompt)))
        if self.command is not None:
            text = await self._run(prompt)
            model = shlex.split(self.command)[0]
        else:
            try:
                text = _read(self.console, "  Your reply as the model: ")
            except _Stop as stop:
                raise InputRefused(f"sampling was {stop.action}d by the user") from None
            model = "human"
        words = text.split()
        stop_reason = "endTurn"
        if len(words) > params.max_tokens:  # a crude token count, but never more than asked
            text, stop_reason = " ".join(words[: params.max_tokens]), "maxTokens"
        return CreateMessageResult(role="assistant", content=TextContent(text=text),
                                   model=model, stop_reason=stop_reason)

    async def _run(self, prompt: str) -> str:
        assert self.command is not None
        try:
            proc = await asyncio.create_subprocess_exec(
                *shlex.split(self.command), stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise InputRefused(f"cannot run the sampler {self.command!r}: {exc}") from None
        try:
            out, _ = await proc.communicate(prompt.encode("utf-8"))
        except asyncio.CancelledError:  # the call's deadline: the sampler must not outlive it
            proc.kill()
            await proc.wait()
            raise
        if proc.returncode != 0:
            raise InputRefused(f"the sampler exited with code {proc.returncode}")
        return out.decode("utf-8", errors="replace").strip()


def _render(params: CreateMessageRequestParams) -> str:
    lines = [f"[system] {params.system_prompt}"] if params.system_prompt is not UNSET else []
    for message in params.messages:
        blocks: Sequence[object] = (message.content if isinstance(message.content, list)
                                    else [message.content])
        for block in blocks:
            body = block.text if isinstance(block, TextContent) else f"[{type(block).__name__}]"
            lines.append(f"[{message.role}] {body}")
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
