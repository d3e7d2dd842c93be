"""How a decorated function becomes a handler: argument checking, async wrapping, templates."""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import types
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from mrtr.server._context import Context
from mrtr.server._schema import ArgumentsInvalid, docstring_summary

__all__ = ["as_async", "calls_begin_task", "check_function", "check_resource", "context_param",
           "describe", "Handler", "schema_converter", "template_pattern"]

Handler = Callable[..., Awaitable[Any]]

_VARIABLE = re.compile(r"\{([A-Za-z0-9_]+)\}")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def schema_converter(
    schema: dict[str, object],
) -> Callable[[Mapping[str, object]], dict[str, object]]:
    """Validate arguments against a schema given verbatim (JSON Schema 2020-12, no remote refs)."""
    import jsonschema  # type: ignore[import-untyped]  # only servers with verbatim schemas pay

    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)

    def convert(arguments: Mapping[str, object]) -> dict[str, object]:
        error = jsonschema.exceptions.best_match(validator.iter_errors(dict(arguments)))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "arguments"
            raise ArgumentsInvalid(f"Invalid arguments: {where}: {error.message}")
        return dict(arguments)

    return convert


def describe(description: str | None, fn: Callable[..., object], name: str) -> str:
    return description or docstring_summary(fn) or name.replace("_", " ")


def calls_begin_task(fn: Callable[..., object]) -> bool:
    """Whether the handler's code (nested functions included) names `begin_task`, so its task
    starts there rather than at the call."""
    pending = [getattr(inspect.unwrap(fn), "__code__", None)]
    while pending:
        code = pending.pop()
        if isinstance(code, types.CodeType):
            if "begin_task" in code.co_names:
                return True
            pending.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return False


def context_param(fn: Callable[..., object]) -> str | None:
    """The parameter that receives the Context: annotated `Context`, or named `ctx`."""
    try:
        hints = inspect.get_annotations(fn, eval_str=True)
    except Exception:  # noqa: BLE001 - unresolved annotations: fall back to the name
        hints = {}
    for param in inspect.signature(fn).parameters.values():
        if hints.get(param.name) is Context or param.name == "ctx":
            return param.name
    return None


def as_async(fn: Callable[..., Any]) -> Handler:
    """Async handlers run as they are; sync ones in a worker thread so they cannot block.

    A thread cannot be interrupted: when the awaiting task is cancelled (client gone, timeout)
    the thread runs on, and `ctx.cancelled` is set so a handler that takes a Context can stop.
    Nor can a thread await: an ask made there raises TypeError (make the handler `async def`).
    """
    if inspect.iscoroutinefunction(fn):
        return fn

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        if not (args and isinstance(args[0], Context)):  # the Context, when wanted, comes first
            return await asyncio.to_thread(fn, *args, **kwargs)
        cancelled = args[0].cancelled  # made here, on the loop, before the thread can race for it
        args[0].asker.in_thread = True
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    return call


def check_function(fn: object, decorator: str) -> None:
    """Refuse what is not a function a decorator can register. Raises TypeError."""
    if inspect.isclass(fn):
        raise TypeError(f"@app.{decorator} got the class {fn.__qualname__}, but a handler is a "
                        f"function: decorate a def or async def, or register a method of an "
                        f"instance: app.{decorator}()({fn.__qualname__}().method)")
    if not callable(fn):
        raise TypeError(f"@app.{decorator} decorates a function, not {fn!r}")


def check_resource(uri: str, fn: Callable[..., object], takes: Collection[str]) -> list[str]:
    """The URI's variables, after checking `uri` and that they match `fn`'s parameters.

    `takes` are the parameters that need no value from the URI (the Context, AskIfMissing).
    Raises ValueError for a URI without a scheme or a malformed variable, TypeError when the
    variables and the parameters do not match; each message names the fix.
    """
    if not _SCHEME.match(uri) or re.search(r"\s", uri):
        raise ValueError(f"resource URI {uri!r} is not a URI: it needs a scheme and no spaces, "
                         "e.g. 'notes://today' or, with a variable, 'file:///notes/{day}.txt'")
    variables = _VARIABLE.findall(uri)
    if "{" in _VARIABLE.sub("", uri) or "}" in _VARIABLE.sub("", uri):
        raise ValueError(f"resource template {uri!r}: write each variable as {{name}} (letters, "
                         "digits and _; RFC 6570 level 1, so no {+name} or {?name})")
    if len(set(variables)) != len(variables):
        raise ValueError(f"resource template {uri!r}: each variable may appear once")
    params = inspect.signature(fn).parameters
    name = getattr(fn, "__qualname__", repr(fn))
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        for variable in variables:
            if variable not in params:
                raise TypeError(f"resource template {uri!r}: {name} has no parameter for the "
                                f"URI variable {{{variable}}}: add `{variable}: str` to it, or "
                                "take the variable out of the URI")
    for param in params.values():
        if (param.name not in variables and param.name not in takes
                and param.default is param.empty
                and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD)):
            where = "template" if variables else "resource"
            raise TypeError(f"{where} {uri!r}: parameter {param.name!r} of {name} is not a "
                            f"variable of the URI, so nothing fills it: put {{{param.name}}} in "
                            f"the URI, give it a default, or mark it "
                            f"Annotated[str, AskIfMissing(...)] to ask the user")
    return variables


def template_pattern(template: str) -> re.Pattern[str]:
    parts = _VARIABLE.split(template)
    regex = "".join(
        f"(?P<{part}>[^/]+)" if i % 2 else re.escape(part) for i, part in enumerate(parts)
    )
    return re.compile(regex)
