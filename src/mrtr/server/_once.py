"""`ctx.once` values: the same type in every round, rebuilt from the JSON a flow keeps."""

# Design: a once value travels as JSON, in the sealed journal and in the store, and a later
# round (or a replay after a crash) never runs fn again: it rebuilds the value from that JSON.
# The type to rebuild comes from what the code says, the same in every round: `returns=`, else
# fn's return annotation. Without either (a lambda), the round that runs fn records the value's
# class beside it ("kept": {"mrtr.once": "module:Class", "value": ...}) when a later round can
# find that class again by name: a module-level Struct, dataclass, Enum or NamedTuple, or one of
# a few builtins. Plain JSON (str, int, float, bool, None, lists and str-keyed dicts of them)
# needs nothing. Any other value is recorded as one that cannot be rebuilt, so the round that
# ran fn and every later one raise the same TypeError: fn never runs twice because of it.
from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import functools
import inspect
import sys
import typing
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import msgspec

__all__ = ["declared_type", "keep", "restore", "run_kept"]

_MARK = "mrtr.once"
_UNBUILDABLE = "!"  # the tag of a value no round can rebuild; the type's name follows
_BUILTINS: dict[str, type] = {
    "tuple": tuple, "set": set, "frozenset": frozenset, "bytes": bytes, "datetime": dt.datetime,
    "date": dt.date, "time": dt.time, "timedelta": dt.timedelta, "uuid": uuid.UUID,
    "decimal": decimal.Decimal,
}
_TAGS = {tp: tag for tag, tp in _BUILTINS.items()}
_CONTAINERS = (tuple, set, frozenset)
_AWAITABLES = (Awaitable, Coroutine)


class Kept(msgspec.Struct, frozen=True):
    """A once value with the name of the type that rebuilds it ("" when it is plain JSON)."""

    type: str = msgspec.field(name=_MARK)
    value: Any = None


def declared_type(fn: Callable[..., object], returns: object) -> object | None:
    """What fn's value is rebuilt as: `returns`, else fn's resolvable return annotation."""
    if returns is not None:
        return returns
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = type(target).__call__  # a callable object: its method says
    annotations = getattr(target, "__annotations__", None)
    if not annotations or "return" not in annotations:
        return None  # a lambda, a builtin: the first run's value decides
    hint: object = annotations["return"]
    if isinstance(hint, str):
        try:
            hint = typing.get_type_hints(target, include_extras=True).get("return")
        except Exception:  # noqa: BLE001 - a name only a type checker sees: as unannotated
            return None
    if typing.get_origin(hint) in _AWAITABLES and not inspect.iscoroutinefunction(target):
        hint = typing.get_args(hint)[-1] if typing.get_args(hint) else Any
    if isinstance(hint, typing.TypeVar):
        return None  # a generic helper's `-> T` says nothing: the value decides
    return type(None) if hint is None else hint


def keep(value: object, declared: object | None) -> object:
    """What the flow records for fn's `value`: the value, or a Kept naming its type."""
    if declared is not None or _plain(value):
        if isinstance(value, dict) and set(value) == {_MARK, "value"}:
            return Kept("", value)  # plain JSON that would read as a Kept
        return value
    return Kept(_tag(value), value)


async def run_kept(fn: Callable[[], object], declared: object | None) -> object:
    """Run fn (awaiting what it returns) and give its value as the flow records it."""
    value = fn()
    if inspect.isawaitable(value):
        value = await value
    return keep(value, declared)


def restore(key: str, stored: object, declared: object | None) -> object:
    """The value of `ctx.once(key, ...)` rebuilt from its recorded JSON.

    Raises TypeError, naming `returns=`, when it cannot be rebuilt as the same type.
    """
    tag, value = "", stored
    if isinstance(stored, dict) and set(stored) == {_MARK, "value"}:
        tag, value = str(stored[_MARK]), stored["value"]
    if tag.startswith(_UNBUILDABLE) and declared is None:
        name = tag[1:]
        raise TypeError(f"ctx.once({key!r}): fn returned a {name}, which later rounds cannot "
                        f"rebuild from JSON (fn has no return annotation): annotate fn's return "
                        f"type or pass returns=, e.g. ctx.once({key!r}, fn, returns={name})")
    target = declared if declared is not None else _resolve(tag) if tag else None
    if target is None:
        return value
    try:
        return msgspec.convert(value, target)
    except (msgspec.ValidationError, TypeError) as exc:
        raise TypeError(f"ctx.once({key!r}): fn's value does not convert to {_name(target)} "
                        f"({exc}): fix fn's return annotation, or pass the type fn returns "
                        "as returns=") from None


def _plain(value: object) -> bool:
    """Whether JSON gives `value` back with the same types (str-keyed dicts, lists, scalars)."""
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return True
    if kind is list:
        return all(_plain(item) for item in value)  # type: ignore[attr-defined]
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())  # type: ignore[attr-defined]
    return False


def _tag(value: object) -> str:
    kind = type(value)
    if kind in _TAGS and (kind not in _CONTAINERS or all(map(_plain, value))):  # type: ignore[call-overload]
        return _TAGS[kind]
    module, qualname = kind.__module__, kind.__qualname__
    if _rebuildable(kind) and "<locals>" not in qualname and _find(module, qualname) is kind:
        return f"{module}:{qualname}"
    return _UNBUILDABLE + _guess(value)


def _rebuildable(kind: type) -> bool:
    return (issubclass(kind, msgspec.Struct | enum.Enum) or dataclasses.is_dataclass(kind)
            or (issubclass(kind, tuple) and typing.NamedTuple in getattr(
                kind, "__orig_bases__", ())))


def _find(module: str, qualname: str) -> object:
    """The object `qualname` names in an imported `module` (never imports one), else None."""
    found: object = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found


def _resolve(tag: str) -> object:
    if tag in _BUILTINS:
        return _BUILTINS[tag]
    module, _, qualname = tag.partition(":")
    found = _find(module, qualname)
    if not (isinstance(found, type) and _rebuildable(found)):
        raise TypeError(f"ctx.once: the recorded type {tag!r} is not loaded in this process: "
                        "pass returns= to name it")
    return found


def _guess(value: object) -> str:
    """The annotation a person would write for `value` (`list[Booking]`), for the message."""
    kind = type(value)
    if kind in (list, tuple, set, frozenset) and value:
        first = next(iter(value))  # type: ignore[call-overload]
        return f"{kind.__name__}[{type(first).__name__}]"
    if kind is dict and value:
        first_key, first = next(iter(value.items()))  # type: ignore[attr-defined]
        return f"dict[{type(first_key).__name__}, {type(first).__name__}]"
    return kind.__name__


def _name(tp: object) -> str:
    return getattr(tp, "__qualname__", None) or repr(tp)
