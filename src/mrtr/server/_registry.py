"""Server: the registry of tools, prompts, resources and completions, filled by decorators."""

# Design: everything derivable from a handler (schemas, the wire Tool/Prompt/Resource objects,
# header maps, the argument converter) is computed once here at registration, never per request.
# The Server holds no keys and no I/O: the Dispatcher pairs it with a Sealer and a clock.
from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

from mrtr.protocol import (
    UNSET,
    Prompt,
    PromptArgument,
    Resource,
    ResourceTemplate,
    Tool,
    ToolAnnotations,
    tool_header_map,
)
from mrtr.server._consent import ConsentMode, ConsentPolicy, consent_schema, tool_consent
from mrtr.server._entries import (
    CompletionEntry,
    PromptEntry,
    ResourceEntry,
    Tables,
    TaskSupport,
    ToolEntry,
)
from mrtr.server._limits import StoreLimits
from mrtr.server._outputs import output_checker, tool_output
from mrtr.server._schema import (
    ask_fields,
    prompt_signature,
    signature_schema,
)
from mrtr.server._wrapping import (
    as_async,
    calls_begin_task,
    check_function,
    check_resource,
    context_param,
    describe,
    schema_converter,
    template_pattern,
)
from mrtr.server.tasks._records import TaskPolicy

if TYPE_CHECKING:
    from mrtr.server._in_process import MemoryTransport

__all__ = ["CachePolicy", "Server"]

Fn = TypeVar("Fn", bound=Callable[..., Any])

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_NEEDS_URI = ("@app.resource needs a URI: write @app.resource('file:///…') or, with variables, "
              "@app.resource('file:///{{name}}'), not a bare @app.resource (got {})")


@dataclass(frozen=True, slots=True)
class CachePolicy:
    """The caching hints (`ttlMs`, `cacheScope`) put on discover, list and read results."""

    ttl_ms: int = 60_000
    scope: str = "private"


class Server:
    """An MCP server definition: `@app.tool()`, `@app.prompt()`, `@app.resource(uri)`."""

    def __init__(
        self,
        name: str,
        *,
        version: str = "0.0.0",
        title: str | None = None,
        instructions: str | None = None,
        cache: CachePolicy = CachePolicy(),  # noqa: B008 - frozen value object
        page_size: int = 100,
        tasks: TaskPolicy = TaskPolicy(),  # noqa: B008 - frozen value object
        limits: StoreLimits = StoreLimits(),  # noqa: B008 - frozen value object
        consent: ConsentPolicy | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.title = title
        self.instructions = instructions
        self.cache = cache
        self.page_size = page_size
        self.tasks = tasks  # TTL, poll interval, per-principal cap and lease of task tools
        self.limits = limits  # bytes kept in the store for callers: per blob, per principal
        self.tables = Tables()
        # The operator's override: clients that declare elicitation and never render it get
        # confirmation tokens instead (docs/consent.md).
        self.consent = consent

    # -- tools ---------------------------------------------------------------------------------
    @overload
    def tool(self, fn: Fn, /) -> Fn: ...
    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        input_schema: dict[str, object] | None = None,
        task: TaskSupport | None = None,
        scopes: Sequence[str] = (),
        replace: bool = False,
        consent: ConsentMode | None = None,
    ) -> Callable[[Fn], Fn]: ...
    def tool(
        self,
        name: str | Fn | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        input_schema: dict[str, object] | None = None,
        task: TaskSupport | None = None,
        scopes: Sequence[str] = (),
        replace: bool = False,
        consent: ConsentMode | None = None,
    ) -> Fn | Callable[[Fn], Fn]:
        """Register a tool (`@app.tool` or `@app.tool(...)`).

        The input schema comes from the type hints unless given verbatim. `task` (tasks
        extension): "optional" runs as a task for clients that declare the extension and in the
        request for others; "required" answers -32021 to the others. See docs/tasks.md.
        `scopes` are the OAuth scopes a caller's token must hold when the transport authorizes
        (docs/auth.md). A second tool of the same name raises ValueError unless `replace=True`.
        `consent` is the default mode of its `ctx.confirm` (docs/consent.md): "auto" (the default
        when `annotations.destructiveHint` is true) asks through the model with a `_confirm`
        token when the client cannot render the question, "token" always does, "native" never.
        """
        mode = tool_consent(consent, annotations.destructive_hint if annotations else None)
        if task not in (None, "optional", "required"):
            raise ValueError(f"task must be 'optional', 'required' or None, not {task!r}")
        if callable(name):  # bare `@app.tool`
            return self.tool()(name)

        def register(fn: Fn) -> Fn:
            check_function(fn, "tool")
            tool_name = name or fn.__name__
            if not _NAME.match(tool_name):
                raise ValueError(f"tool name {tool_name!r} must match {_NAME.pattern}")
            _check_new(self.tables.tools, tool_name, "tool", replace)
            ctx_param = context_param(fn)
            convert: Callable[[Mapping[str, object]], dict[str, object]]
            if input_schema is None:
                sig = signature_schema(fn, skip={ctx_param} if ctx_param else set())
                schema, convert, asks = sig.input_schema, sig.converter(), sig.ask_if_missing
            else:
                schema, convert, asks = input_schema, schema_converter(input_schema), {}
            out, dump = tool_output(fn)
            tool = Tool(
                name=tool_name,
                title=title if title is not None else UNSET,
                description=describe(description, fn, tool_name),
                input_schema=schema if mode == "native" else consent_schema(schema),
                output_schema=out if out is not None else UNSET,
                annotations=annotations if annotations is not None else UNSET,
            )
            header_map = tool_header_map(schema)
            check = output_checker(out) if out is not None else None
            self.tables.tools[tool_name] = ToolEntry(
                tool, as_async(fn), convert, asks, header_map, ctx_param is not None, check,
                task, task is not None and calls_begin_task(fn), frozenset(scopes), dump, mode,
            )
            return fn

        return register

    # -- prompts -------------------------------------------------------------------------------
    @overload
    def prompt(self, fn: Fn, /) -> Fn: ...
    @overload
    def prompt(
        self, name: str | None = None, *, title: str | None = None,
        description: str | None = None, replace: bool = False,
    ) -> Callable[[Fn], Fn]: ...
    def prompt(
        self, name: str | Fn | None = None, *, title: str | None = None,
        description: str | None = None, replace: bool = False,
    ) -> Fn | Callable[[Fn], Fn]:
        """Register a prompt (`@app.prompt` or `@app.prompt(...)`).

        Its string parameters become the prompt's arguments. With pydantic parameters
        (`Annotated[int, Field(ge=1)]`, models) the arguments are validated and converted by
        pydantic, and a field's description is the argument's description. AskIfMissing ones are
        optional and asked when omitted. A second prompt of the same name raises ValueError unless
        `replace=True`.
        """
        if callable(name):  # bare `@app.prompt`
            return self.prompt()(name)

        def register(fn: Fn) -> Fn:
            check_function(fn, "prompt")
            prompt_name = name or fn.__name__
            _check_new(self.tables.prompts, prompt_name, "prompt", replace)
            ctx_param = context_param(fn)
            asks = ask_fields(fn, skip={ctx_param} if ctx_param else set())
            arguments: list[PromptArgument] = []
            required: list[str] = []
            typed = prompt_signature(fn, skip={ctx_param} if ctx_param else set())
            for param in inspect.signature(fn).parameters.values():
                if param.name == ctx_param:
                    continue
                is_required, text = (typed.argument(param.name) if typed is not None
                                     else (param.default is inspect.Parameter.empty, None))
                is_required = is_required and param.name not in asks
                arguments.append(PromptArgument(
                    name=param.name, required=is_required,
                    description=text if text is not None else UNSET))
                if is_required:
                    required.append(param.name)
            prompt = Prompt(
                name=prompt_name,
                title=title if title is not None else UNSET,
                description=describe(description, fn, prompt_name),
                arguments=arguments if arguments else UNSET,
            )
            self.tables.prompts[prompt_name] = PromptEntry(
                prompt, as_async(fn), tuple(required), ctx_param is not None,
                typed.converter() if typed is not None else None, asks,
            )
            return fn

        return register

    # -- resources -----------------------------------------------------------------------------
    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        replace: bool = False,
    ) -> Callable[[Fn], Fn]:
        """Register a resource, or a template when `uri` has `{variables}` (RFC 6570 level 1).

        Raises TypeError when used bare (`@app.resource`): a resource needs its URI. Raises
        ValueError for a URI without a scheme, or one registered already (unless `replace=True`),
        and TypeError when the URI's variables and the function's parameters do not match.
        """
        if not isinstance(uri, str):  # bare `@app.resource` passes the function as the URI
            raise TypeError(_NEEDS_URI.format(getattr(uri, "__qualname__", None) or repr(uri)))

        def register(fn: Fn) -> Fn:
            check_function(fn, "resource")
            ctx_param = context_param(fn)
            asks = ask_fields(fn, skip={ctx_param} if ctx_param else set())
            variables = check_resource(uri, fn, {*asks, *([ctx_param] if ctx_param else [])})
            table = self.tables.templates if variables else self.tables.resources
            _check_new(table, uri, "resource template" if variables else "resource", replace)
            res_name = name or fn.__name__
            common: dict[str, Any] = {
                "name": res_name,
                "title": title if title is not None else UNSET,
                "description": describe(description, fn, res_name),
                "mime_type": mime_type if mime_type is not None else UNSET,
            }
            call = as_async(fn)
            if variables:
                template = ResourceTemplate(uri_template=uri, **common)
                entry = ResourceEntry(
                    template, call, mime_type, ctx_param is not None, template_pattern(uri), asks
                )
            else:
                resource = Resource(uri=uri, **common)
                entry = ResourceEntry(resource, call, mime_type, ctx_param is not None, None, asks)
            table[uri] = entry
            return fn

        return register

    # -- completion ----------------------------------------------------------------------------
    def completion(
        self, *, prompt: str | None = None, resource_template: str | None = None
    ) -> Callable[[Fn], Fn]:
        """Register argument completion for a prompt or a resource template.

        The handler is `fn([ctx,] argument: str, value: str, context: dict[str, str]) -> list[str]`.
        """
        if (prompt is None) == (resource_template is None):
            raise ValueError("give exactly one of prompt= or resource_template=")
        ref = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", resource_template)

        def register(fn: Fn) -> Fn:
            entry = CompletionEntry(as_async(fn), context_param(fn) is not None)
            self.tables.completions[(ref[0], str(ref[1]))] = entry
            return fn

        return register

    def in_process_transport(self, *, principal: str | None = None) -> MemoryTransport:
        """A client transport calling this server in this process (`Client(app)`): a Dispatcher
        of its own (ephemeral key, no store); `principal` is what its handlers see."""
        from mrtr.server._in_process import MemoryTransport

        return MemoryTransport(self, principal=principal)

    # -- lookups used by the dispatcher ---------------------------------------------------------
    def match_template(self, uri: str) -> tuple[ResourceEntry, dict[str, str]] | None:
        """The first template matching `uri`, with its variables."""
        for entry in self.tables.templates.values():
            assert entry.pattern is not None
            found = entry.pattern.fullmatch(uri)
            if found:
                return entry, found.groupdict()
        return None


def _check_new(table: Mapping[str, Any], key: str, kind: str, replace: bool) -> None:
    """Refuse a second registration under `key` unless it is meant to replace the first."""
    if key in table and not replace:
        first = getattr(table[key].call, "__qualname__", "another function")
        what = "named" if "resource" not in kind else "with the URI"
        raise ValueError(f"a {kind} {what} {key!r} is registered already (by {first}): give "
                         f"this one another {'name' if what == 'named' else 'URI'}, or pass "
                         "replace=True to replace the first")
