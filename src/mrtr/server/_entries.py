"""What registration computes for each handler: the entries of a Server's tables.

The Dispatcher, the runners and the task runner read these; only `Server` (in _registry) fills
them, so modules that only need the entries never import the registry.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from mrtr.protocol import Prompt, Resource, ResourceTemplate, Tool
from mrtr.server._wrapping import Handler

__all__ = ["CompletionEntry", "PromptEntry", "ResourceEntry", "Tables", "TaskSupport", "ToolEntry"]

TaskSupport: TypeAlias = Literal["optional", "required"]


@dataclass(frozen=True, slots=True)
class ToolEntry:
    tool: Tool
    call: Handler  # call(ctx, **arguments)
    convert: Callable[[Mapping[str, object]], dict[str, object]]  # raises ArgumentsInvalid
    ask_if_missing: Mapping[str, tuple[str, dict[str, object]]]
    header_map: dict[str, str]
    wants_ctx: bool
    check_output: Callable[[object], str | None] | None = None  # None: no outputSchema
    task: TaskSupport | None = None  # tasks extension: None means never a task
    task_later: bool = False  # the handler calls ctx.begin_task(): MRTR rounds come first
    scopes: frozenset[str] = frozenset()  # OAuth scopes a caller needs (mrtr.auth)
    # A pydantic return type's dump: value → (JSON for the text, structuredContent).
    dump: Callable[[object], tuple[object, object]] | None = None
    consent: str = "native"  # ctx.confirm's default mode (server/_consent.py)


@dataclass(frozen=True, slots=True)
class PromptEntry:
    prompt: Prompt
    call: Handler
    required: tuple[str, ...]
    wants_ctx: bool
    # pydantic parameters: the string arguments validated and converted (raises ArgumentsInvalid)
    convert: Callable[[Mapping[str, object]], dict[str, object]] | None = None
    ask_if_missing: Mapping[str, tuple[str, dict[str, object]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResourceEntry:
    resource: Resource | ResourceTemplate
    call: Handler
    mime_type: str | None
    wants_ctx: bool
    pattern: re.Pattern[str] | None = None  # templates only
    ask_if_missing: Mapping[str, tuple[str, dict[str, object]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CompletionEntry:
    call: Handler
    wants_ctx: bool


@dataclass(slots=True)
class Tables:
    tools: dict[str, ToolEntry] = field(default_factory=dict)
    prompts: dict[str, PromptEntry] = field(default_factory=dict)
    resources: dict[str, ResourceEntry] = field(default_factory=dict)
    templates: dict[str, ResourceEntry] = field(default_factory=dict)
    completions: dict[tuple[str, str], CompletionEntry] = field(default_factory=dict)
