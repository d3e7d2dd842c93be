"""The base of every wire Struct: camelCase on the wire from one rename rule, absent is not null."""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["JSON", "JSONObject", "UNSET", "UnsetType", "Wire"]

# Design: msgspec cannot resolve a recursive alias, so any JSON value is typed `Any` here in one
# place; public signatures use `JSON`/`JSONObject` and never spell `Any` themselves.
JSON: TypeAlias = Any
JSONObject: TypeAlias = dict[str, Any]


class Wire(msgspec.Struct, rename="camel", kw_only=True, frozen=True):
    """Base of the wire types.

    Optional fields default to UNSET so that absent stays absent on re-encode; fields with
    a real default (e.g. `resultType`) are always written.
    """
