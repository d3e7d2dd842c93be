"""Typed builders for the flat `requestedSchema` properties of form-mode elicitation."""

# Design: these are not a decodable union (the enum variants and StringSchema all say
# `"type": "string"`), so `ElicitRequestParams.requested_schema` stays a JSON object; a server
# builds one with `requested_schema(...)` from these Structs.
from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from ._wire import UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "BooleanSchema",
    "EnumOption",
    "LegacyTitledEnumSchema",
    "NumberSchema",
    "PrimitiveSchemaDefinition",
    "StringSchema",
    "TitledEnumItems",
    "TitledMultiSelectEnumSchema",
    "TitledSingleSelectEnumSchema",
    "UntitledEnumItems",
    "UntitledMultiSelectEnumSchema",
    "UntitledSingleSelectEnumSchema",
    "requested_schema",
]


class StringSchema(Wire, frozen=True, kw_only=True):
    """A free-text field."""

    type: Literal["string"] = "string"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    min_length: int | UnsetType = UNSET
    max_length: int | UnsetType = UNSET
    format: Literal["email", "uri", "date", "date-time"] | UnsetType = UNSET
    default: str | UnsetType = UNSET


class NumberSchema(Wire, frozen=True, kw_only=True):
    """A number or integer field."""

    type: Literal["number", "integer"] = "number"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    minimum: float | UnsetType = UNSET
    maximum: float | UnsetType = UNSET
    default: float | UnsetType = UNSET


class BooleanSchema(Wire, frozen=True, kw_only=True):
    """A yes/no field."""

    type: Literal["boolean"] = "boolean"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    default: bool | UnsetType = UNSET


class EnumOption(Wire, frozen=True, kw_only=True):
    """One titled choice."""

    const: str
    title: str


class UntitledSingleSelectEnumSchema(Wire, frozen=True, kw_only=True):
    """Pick one of `enum`."""

    type: Literal["string"] = "string"
    enum: list[str]
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    default: str | UnsetType = UNSET


class TitledSingleSelectEnumSchema(Wire, frozen=True, kw_only=True):
    """Pick one of `one_of`, each with a display title."""

    type: Literal["string"] = "string"
    one_of: list[EnumOption]
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    default: str | UnsetType = UNSET


class UntitledEnumItems(Wire, frozen=True, kw_only=True):
    """The items of an untitled multi-select."""

    type: Literal["string"] = "string"
    enum: list[str]


class TitledEnumItems(Wire, frozen=True, kw_only=True):
    """The items of a titled multi-select."""

    any_of: list[EnumOption]


class UntitledMultiSelectEnumSchema(Wire, frozen=True, kw_only=True):
    """Pick several of `items.enum`."""

    type: Literal["array"] = "array"
    items: UntitledEnumItems
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    min_items: int | UnsetType = UNSET
    max_items: int | UnsetType = UNSET
    default: list[str] | UnsetType = UNSET


class TitledMultiSelectEnumSchema(Wire, frozen=True, kw_only=True):
    """Pick several of `items.any_of`, each with a display title."""

    type: Literal["array"] = "array"
    items: TitledEnumItems
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    min_items: int | UnsetType = UNSET
    max_items: int | UnsetType = UNSET
    default: list[str] | UnsetType = UNSET


class LegacyTitledEnumSchema(Wire, frozen=True, kw_only=True):
    """Deprecated: `enum` with parallel `enum_names`."""

    type: Literal["string"] = "string"
    enum: list[str]
    enum_names: list[str] | UnsetType = UNSET
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    default: str | UnsetType = UNSET


PrimitiveSchemaDefinition: TypeAlias = (
    StringSchema
    | NumberSchema
    | BooleanSchema
    | UntitledSingleSelectEnumSchema
    | TitledSingleSelectEnumSchema
    | UntitledMultiSelectEnumSchema
    | TitledMultiSelectEnumSchema
    | LegacyTitledEnumSchema
)


def requested_schema(
    properties: dict[str, PrimitiveSchemaDefinition], required: list[str] | None = None
) -> JSONObject:
    """Build a form-mode `requestedSchema` object from typed property schemas."""
    schema: JSONObject = {"type": "object", "properties": msgspec.to_builtins(properties)}
    if required:
        schema["required"] = list(required)
    return schema
