"""Terminal forms on prompt_toolkit: choice lists, inline validation, defaults, history."""

# Design: the same flow as the line-based TerminalForms (message, one field after another,
# review, `(declined)` / `(cancelled)`), drawn by prompt_toolkit on stderr when a person sits at
# a terminal. A value is checked as it is entered, first by `parse_field` (the plain forms'
# rules), then against the field's own JSON Schema by the server's Checker (jsonschema), and the
# reason shows under the input line until the value fits. Enums, oneOf lists and booleans are
# choice lists; the schema's default (or the answer given before, in review) is pre-filled.
# History is per field name, in memory only: answers (emails, names) never reach the disk.
from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TypeVar

from prompt_toolkit import PromptSession
from prompt_toolkit.application import create_app_session
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output, create_output
from prompt_toolkit.shortcuts.choice_input import ChoiceInput
from prompt_toolkit.validation import ValidationError, Validator

from mrtr.protocol import UNSET, ElicitRequestParams, ElicitResult, ElicitValue
from mrtr.server._schema_check import Checker, FormInvalid

from ._escape import escape
from ._forms_tui import (
    Console,
    TerminalForms,
    _choices,
    _describe,
    _line,
    _show,
    _Stop,
    heading,
    parse_field,
)

__all__ = ["KEYS", "PromptForms", "schema_problem"]

KEYS = "Ctrl-X declines, Ctrl-C cancels, Up recalls an earlier answer"
_T = TypeVar("_T")


def schema_problem(name: str, prop: Mapping[str, object], value: ElicitValue) -> str | None:
    """Why `value` does not fit the field's JSON Schema, or None when it does."""
    schema = {"type": "object", "properties": {name: dict(prop)}}
    try:
        Checker(schema).check({name: value})
    except FormInvalid as invalid:
        return invalid.problems.get(name) or invalid.message
    except Exception:  # noqa: BLE001 - a malformed schema from the server: parse_field decided
        return None
    return None


class _FieldCheck(Validator):
    """Inline validation of one field: the reason shows under the input until it fits."""

    def __init__(self, name: str, prop: Mapping[str, object], required: bool) -> None:
        self.name, self.prop, self.required = name, prop, required

    def validate(self, document: Document) -> None:
        problem = self.problem(document.text.strip())
        if problem is not None:  # the cursor stays at the end, where the user was typing
            raise ValidationError(len(document.text), "    ! " + _line(problem))

    def problem(self, text: str) -> str | None:
        if text in (":decline", ":cancel"):
            return None
        if not text:
            return "a value is required" if self.required else None
        try:
            value = parse_field(self.prop, text)
        except ValueError as exc:
            return str(exc)
        return schema_problem(self.name, self.prop, value)


class _ChoiceCompleter(Completer):
    """Completes the choice being typed after the last comma (multi-select fields)."""

    def __init__(self, values: list[str]) -> None:
        self.values = values

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        typed = document.text_before_cursor.rsplit(",", 1)[-1].lstrip()
        for value in self.values:
            if value.startswith(typed):
                yield Completion(value, start_position=-len(typed), display=_line(value))


def _keys() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("c-x", eager=True)
    def _decline(event: KeyPressEvent) -> None:
        event.app.exit(exception=_Stop("decline"))

    return bindings


class PromptForms(TerminalForms):
    """An ElicitationHandler drawing its questions with prompt_toolkit (stdin must be a TTY).

    `before_ask` runs before each form, e.g. to take a progress bar off the screen. The prompts
    draw on `output` (default: stderr) and read `input` (default: stdin).
    """

    def __init__(self, console: Console, *, server: str = "The server",
                 before_ask: Callable[[], None] = lambda: None, input: Input | None = None,
                 output: Output | None = None) -> None:
        super().__init__(console, server=server)
        self.before_ask = before_ask
        self.input, self.output = input, output
        self._history: dict[str, InMemoryHistory] = {}

    async def __call__(self, params: ElicitRequestParams, /) -> ElicitResult:
        self.before_ask()
        try:
            output = self.output or create_output(stdout=sys.stderr)
            with create_app_session(input=self.input, output=output):
                if params.mode == "url":
                    return await self._open_url(params)
                return await self._ask_form(params)
        except _Stop as stop:
            return self._refuse(stop)

    async def _open_url(self, params: ElicitRequestParams) -> ElicitResult:
        url = self._show_url(params)
        if await self._choose(" Open it?", [("no", "No"), ("yes", "Yes")], "no") != "yes":
            raise _Stop("decline")
        self.console.write(f"  Open it in your browser: {url}")
        return ElicitResult(action="accept")

    async def _ask_form(self, params: ElicitRequestParams) -> ElicitResult:
        schema = params.requested_schema if params.requested_schema is not UNSET else {}
        props = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        self.console.write(f"\n{self.server} asks: {escape(params.message)}")
        self.console.write(f"  ({KEYS})")
        values: dict[str, ElicitValue] = {}
        while True:
            for name, prop in props.items():
                await self._ask(values, name, prop, name in required)
            if len(props) < 2 or await self._review(values):
                return ElicitResult(action="accept", content=values)

    async def _ask(self, values: dict[str, ElicitValue], name: str,
                   prop: Mapping[str, object], required: bool) -> None:
        current = values.get(name, prop.get("default"))
        choices = _choices(prop)
        if prop.get("type") == "boolean" and not choices:
            choices = [("yes", "yes"), ("no", "no")]
            current = None if current is None else ("yes" if current is True else "no")
        if choices and prop.get("type") != "array":
            answer = await self._pick(name, prop, choices, current, required)
        else:
            self.console.write("  " + heading(name, prop))
            answer = await self._type(name, prop, current, required)
        if answer is None:
            values.pop(name, None)
        else:
            values[name] = answer

    async def _pick(self, name: str, prop: Mapping[str, object], choices: list[tuple[str, str]],
                    current: object, required: bool) -> ElicitValue | None:
        options = [(value, _line(title)) for value, title in choices]
        if not required and current is None:
            options.append(("", "(no answer)"))
        # A stray Enter never picks what nobody chose: an optional field defaults to no answer,
        # a boolean to "no"; only a required choice without a default starts on its first option.
        if current is not None:
            default = str(current)
        elif not required or prop.get("type") == "boolean":
            default = "" if not required else "no"
        else:
            default = options[0][0]
        picked = await self._choose(f" {heading(name, prop)}", options, default)
        if not picked:
            return None
        if prop.get("type") == "boolean":
            return picked == "yes"
        return parse_field(prop, picked)

    async def _type(self, name: str, prop: Mapping[str, object], current: object,
                    required: bool) -> ElicitValue | None:
        _, label = _describe(name, prop, required)
        words = [value for value, _ in _choices(prop)]
        session: PromptSession[str] = PromptSession(
            history=self._history.setdefault(name, InMemoryHistory()),
            validator=_FieldCheck(name, prop, required), validate_while_typing=False,
            completer=_ChoiceCompleter(words) if words else None,
            key_bindings=_keys(), enable_history_search=False,
        )
        text = await self._run(lambda: session.prompt_async(
            label, default="" if current is None else _show(current)))
        text = text.strip()
        if text in (":decline", ":cancel"):
            raise _Stop(text[1:])
        return parse_field(prop, text) if text else None

    async def _review(self, values: Mapping[str, ElicitValue]) -> bool:
        summary = ", ".join(f"{k}={_show(v)}" for k, v in values.items())
        self.console.write(f"  Answers: {_line(summary)}")
        picked = await self._choose(" Send them?", [
            ("send", "Send"), ("edit", "Edit the answers"), ("decline", "Decline")], "send")
        if picked == "decline":
            raise _Stop("decline")
        return picked == "send"

    async def _choose(self, message: str, options: list[tuple[str, str]], default: str) -> str:
        choice = ChoiceInput(message=message, options=options, default=default,
                             key_bindings=_keys())
        return await self._run(choice.prompt_async)

    async def _run(self, prompt: Callable[[], Awaitable[_T]]) -> _T:
        try:
            return await prompt()
        except (EOFError, KeyboardInterrupt):
            raise _Stop("cancel") from None

