"""How a decorated function becomes a handler: argument checking, async wrapping, templates."""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import types
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mrtr.server._context import Context
from mrtr.server._schema import ArgumentsInvalid, docstring_summary

__all__ = ["as_async", "calls_begin_task", "context_param", "describe", "Handler",
           "schema_converter", "template_pattern"]

Handler = Callable[..., Awaitable[Any]]


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


def template_pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{([A-Za-z0-9_]+)\}", template)
    regex = "".join(
        f"(?P<{part}>[^/]+)" if i % 2 else re.escape(part) for i, part in enumerate(parts)
    )
    return re.compile(regex)
