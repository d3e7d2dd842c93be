"""Tool input and output schemas from type hints, computed once at registration."""

# Design: the parameters (minus framework-injected ones) become one msgspec Struct built with
# defstruct, so one msgspec.convert both validates and converts `arguments`, and the inputSchema
# is msgspec's own schema for that Struct: the schema and the validator cannot disagree.
# AskIfMissing parameters default to UNSET so that "omitted" stays visible to the round engine.
from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import re
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from mrtr.server import _pydantic
from mrtr.server._forms import field_property, humanise, unwrap
from mrtr.server._pydantic_forms import form_property

__all__ = [
    "ArgumentsInvalid",
    "AskIfMissing",
    "Header",
    "ToolSignature",
    "ask_fields",
    "convert_arguments",
    "docstring_summary",
    "prompt_signature",
    "signature_schema",
]

Dump = Callable[[object], tuple[object, object]]
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_TYPES = (str, int, bool)


class ArgumentsInvalid(ValueError):
    """Tool `arguments` do not match the input schema; the message names the failing path."""


@dataclasses.dataclass(frozen=True, slots=True)
class Header:
    """Parameter marker: mirror this argument in the `Mcp-Param-{name}` HTTP header."""

    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class AskIfMissing:
    """Parameter marker: when the client omits this argument, elicit it from the user.

    Works on tools, prompts and resources. The parameters a request omitted are asked in one
    form under the key `AskIfMissing.key(*names)`.
    """

    message: str | None = None

    @staticmethod
    def key(*names: str) -> str:
        """The ask key for these omitted parameters: `args:` and their sorted names, by commas
        (`answers={AskIfMissing.key("region"): {"region": "eu"}}` in a TestClient script)."""
        return "args:" + ",".join(sorted(names))


@dataclasses.dataclass(frozen=True, slots=True)
class ToolSignature:
    """What registration learns from a handler's signature."""

    input_schema: dict[str, object]
    args_type: type[msgspec.Struct] | None  # None: the parameters are pydantic's
    param_names: tuple[str, ...]
    ask_if_missing: Mapping[str, tuple[str, dict[str, object]]]  # param → (message, property)
    pydantic_convert: Callable[[Mapping[str, object]], dict[str, object]] | None = None

    def converter(self) -> Callable[[Mapping[str, object]], dict[str, object]]:
        """Validate and convert `arguments` into handler keyword arguments (ArgumentsInvalid)."""
        if self.pydantic_convert is not None:
            return self.pydantic_convert
        return functools.partial(convert_arguments, self)

    def argument(self, name: str) -> tuple[bool, str | None]:
        """Whether parameter `name` is required, and its description in the schema."""
        props = typing.cast(Mapping[str, Mapping[str, object]], self.input_schema["properties"])
        text = props.get(name, {}).get("description")
        required = typing.cast(list[str], self.input_schema["required"])
        return name in required, text if isinstance(text, str) else None


def _hints(fn: Callable[..., object]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except NameError as exc:
        raise TypeError(f"{_name(fn)}: cannot resolve an annotation ({exc})") from None


def _name(fn: Callable[..., object]) -> str:
    return str(getattr(fn, "__qualname__", fn))


def _strip_markers(annotation: object) -> tuple[object, Header | None, AskIfMissing | None]:
    """Remove our markers from an Annotated type, keeping msgspec.Meta and the rest."""
    if typing.get_origin(annotation) is not Annotated:
        return annotation, None, None
    base, *extras = typing.get_args(annotation)
    header = next((m for m in extras if isinstance(m, Header)), None)
    ask = next((m for m in extras if isinstance(m, AskIfMissing)), None)
    rest = [m for m in extras if not isinstance(m, Header | AskIfMissing)]
    return (typing.cast(Any, Annotated)[(base, *rest)] if rest else base), header, ask


def _check_header(param: str, header: Header, annotation: object, seen: set[str]) -> None:
    base = unwrap(annotation)[0]
    if base not in _HEADER_TYPES:
        raise TypeError(f"parameter {param!r}: Header needs a str, int or bool, not {base!r}")
    if not _TOKEN.fullmatch(header.name) or header.name.lower() in seen:
        raise TypeError(f"parameter {param!r}: invalid or duplicate header name {header.name!r}")
    seen.add(header.name.lower())


def _default(param: inspect.Parameter) -> object:
    """The defstruct default: a factory for non-empty mutable defaults (msgspec refuses them)."""
    value = param.default
    if value is inspect.Parameter.empty:
        return msgspec.NODEFAULT
    if isinstance(value, list | dict | set | bytearray) and value:
        return msgspec.field(default_factory=functools.partial(copy.deepcopy, value))
    return value


def _inline(tp: object) -> dict[str, object]:
    """msgspec's schema for an object type, inlined, other components kept under `$defs`."""
    (ref,), components = msgspec.json.schema_components([tp], ref_template="#/$defs/{name}")
    body = dict(components.pop(str(ref["$ref"]).rsplit("/", 1)[1]))
    body.pop("title", None)
    if components:
        body["$defs"] = components
    return body


def _parameters(fn: Callable[..., object], skip: Collection[str]) -> list[inspect.Parameter]:
    params = []
    for p in inspect.signature(fn).parameters.values():
        if p.name in skip:
            continue
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"{_name(fn)}: parameter {p.name!r} must be passable by keyword")
        params.append(p)
    return params


def signature_schema(fn: Callable[..., object], *, skip: Collection[str]) -> ToolSignature:
    """Build the inputSchema and argument converter for `fn`, ignoring `skip` parameters.

    Raises TypeError for unsupported parameter types or misused markers.
    """
    hints = _hints(fn)
    params = _parameters(fn, skip)
    if any(_pydantic.involves(hints.get(p.name), p.default) for p in params):
        return _pydantic_signature(fn, hints, params)
    return _msgspec_signature(fn, hints, params)


def _msgspec_signature(fn: Callable[..., object], hints: Mapping[str, Any],
                       params: list[inspect.Parameter]) -> ToolSignature:
    fields: list[tuple[str, object, object]] = []
    headers: dict[str, str] = {}
    asks: dict[str, tuple[str, dict[str, object]]] = {}
    defaults: dict[str, object] = {}
    for p in params:
        annotation, header, ask = _strip_markers(hints.get(p.name, Any))
        default = _default(p)
        if p.default is not inspect.Parameter.empty:
            defaults[p.name] = msgspec.to_builtins(p.default)
        if header is not None:
            _check_header(p.name, header, annotation, {h.lower() for h in headers.values()})
            headers[p.name] = header.name
        if ask is not None:
            asks[p.name] = _ask(p, annotation, ask)
            annotation, default = typing.cast(Any, typing.Union)[annotation, UnsetType], UNSET
        fields.append((p.name, annotation, default))
    args_type = msgspec.defstruct(f"{getattr(fn, '__name__', 'tool')}_arguments", fields,
                                  kw_only=True, module=getattr(fn, "__module__", None))
    try:
        body = _inline(args_type)
    except TypeError as exc:
        raise _unsupported(fn, fields, exc) from None
    props = typing.cast(dict[str, dict[str, object]], body.setdefault("properties", {}))
    for name, value in defaults.items():
        props[name]["default"] = value
    for name, header_name in headers.items():
        props[name]["x-mcp-header"] = header_name
    for name, annotation, _ in fields:
        _keep_declared_order(annotation, props.get(name))
    schema: dict[str, object] = {"type": "object", "properties": props,
                                 "required": body.get("required", [])}
    if "$defs" in body:
        schema["$defs"] = body["$defs"]
    return ToolSignature(schema, args_type, tuple(f[0] for f in fields), asks)


def prompt_signature(fn: Callable[..., object], *, skip: Collection[str]) -> ToolSignature | None:
    """The signature of a prompt with pydantic parameters, else None (its arguments are the
    strings the client sent). Pydantic converts the strings (`"3"` for an int)."""
    try:  # prompts without pydantic keep what they accepted before: any annotations, **kwargs
        hints = typing.get_type_hints(fn, include_extras=True)
    except NameError:
        return None
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in skip]
    if any(_pydantic.involves(hints.get(p.name), p.default) for p in params):
        return _pydantic_signature(fn, hints, _parameters(fn, skip))
    return None


def _pydantic_signature(fn: Callable[..., object], hints: Mapping[str, Any],
                        params: list[inspect.Parameter]) -> ToolSignature:
    """The inputSchema and converter of a handler with pydantic parameters (docs/server.md)."""
    found: list[_pydantic.Parameter] = []
    headers: dict[str, str] = {}
    messages: dict[str, str] = {}
    for p in params:
        annotation, header, ask = _strip_markers(hints.get(p.name, Any))
        if _pydantic.mixes_msgspec(annotation):
            raise TypeError(f"{_name(fn)}: parameter {p.name!r} uses msgspec (a Struct or Meta) "
                            "beside pydantic parameters, and pydantic cannot read msgspec types: "
                            "use pydantic.Field(...) and BaseModel in this handler")
        if header is not None:
            _check_header(p.name, header, annotation, {h.lower() for h in headers.values()})
            headers[p.name] = header.name
        if ask is not None:
            messages[p.name] = ask.message or f"Please provide {humanise(p.name).lower()}."
        default = _pydantic.NO_DEFAULT if p.default is inspect.Parameter.empty else p.default
        found.append(_pydantic.Parameter(p.name, annotation, default, ask is not None))
    try:
        schema, validate = _pydantic.arguments(getattr(fn, "__name__", "tool"), found)
    except TypeError as exc:
        raise TypeError(f"{_name(fn)}: unsupported parameter type: {exc}") from None
    props = typing.cast(dict[str, dict[str, object]], schema["properties"])
    for name, header_name in headers.items():
        props[name]["x-mcp-header"] = header_name
    asks = _model_asks(messages, schema)

    def convert(arguments: Mapping[str, object]) -> dict[str, object]:
        if not isinstance(arguments, Mapping):
            raise ArgumentsInvalid("Invalid arguments: expected an object")
        try:
            return validate(arguments)
        except _pydantic.Invalid as exc:
            raise ArgumentsInvalid(f"Invalid arguments: {exc}") from None

    return ToolSignature(schema, None, tuple(p.name for p in found), asks, convert)


def _model_asks(messages: Mapping[str, str],
                schema: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, object]]]:
    """The form property of each AskIfMissing parameter, from its pydantic schema."""
    defs = typing.cast(Mapping[str, Mapping[str, object]], schema.get("$defs") or {})
    asks: dict[str, tuple[str, dict[str, object]]] = {}
    for name, message in messages.items():
        try:
            asks[name] = message, form_property(name, schema["properties"][name], defs)
        except TypeError as exc:
            raise TypeError(f"parameter {name!r}: AskIfMissing needs a form-friendly type: "
                            f"{exc}") from None
    return asks


_SUPPORTED = ("use str, int, float, bool, a date or datetime, a Literal or Enum, a list or dict of "
              "those, a msgspec.Struct, a dataclass or a TypedDict (bounds and descriptions with "
              "Annotated[int, msgspec.Meta(ge=1)]), or give the tool input_schema= verbatim")


def _unsupported(fn: Callable[..., object], fields: list[tuple[str, object, object]],
                 exc: TypeError) -> TypeError:
    """The TypeError for a parameter type with no JSON Schema, naming the parameter."""
    for name, annotation, _ in fields:
        try:
            msgspec.json.schema(annotation)
        except TypeError as inner:
            found = re.search(r"type (.+) is not supported", str(inner))
            what = found.group(1) if found else str(inner).strip().splitlines()[-1]
            what = re.sub(r"<class '(?:[\w.]+\.)?(\w+)'>", r"\1", what)
            shown = (annotation.__name__ if isinstance(annotation, type)
                     else re.sub(r"(?:\w+\.)+", "", repr(annotation)))
            return TypeError(f"{_name(fn)}: unsupported parameter type: parameter {name!r} "
                             f"({shown}): {what} has no JSON Schema to tell a client what to "
                             f"send: {_SUPPORTED}")
    return TypeError(f"{_name(fn)}: unsupported parameter type ({exc}): {_SUPPORTED}")


def _keep_declared_order(annotation: object, prop: object) -> None:
    """Put a Literal's choices back in the order the author wrote them (msgspec sorts them)."""
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) is typing.Literal:
        choices = list(dict.fromkeys(typing.get_args(annotation)))
        _reorder(prop, choices)
        return
    for arg in typing.get_args(annotation):  # Optional[Literal[...]] and other unions
        _keep_declared_order(arg, prop)


def _reorder(prop: object, choices: list[object]) -> None:
    if not isinstance(prop, dict):
        return
    enum = prop.get("enum")
    if isinstance(enum, list) and sorted(map(repr, enum)) == sorted(map(repr, choices)):
        prop["enum"] = choices
    for branch in prop.get("anyOf", ()):
        _reorder(branch, choices)


def _ask(p: inspect.Parameter, annotation: object,
         ask: AskIfMissing) -> tuple[str, dict[str, object]]:
    default = p.default if p.default is not inspect.Parameter.empty else msgspec.NODEFAULT
    try:
        prop = field_property(p.name, annotation, default)
    except TypeError as exc:
        raise TypeError(f"parameter {p.name!r}: AskIfMissing needs a form-friendly type: "
                        f"{exc}") from None
    return ask.message or f"Please provide {humanise(p.name).lower()}.", prop


def ask_fields(
    fn: Callable[..., object], *, skip: Collection[str]
) -> dict[str, tuple[str, dict[str, object]]]:
    """The AskIfMissing parameters of a prompt or resource handler: name → (message, property).

    Raises TypeError for a misused marker, or an annotation that cannot be resolved when one
    names AskIfMissing.
    """
    try:
        hints = _hints(fn)
    except TypeError:  # prompts and resources never needed their hints: only ours must resolve
        if any("AskIfMissing" in str(a) for a in getattr(fn, "__annotations__", {}).values()):
            raise
        return {}
    asks: dict[str, tuple[str, dict[str, object]]] = {}
    for p in inspect.signature(fn).parameters.values():
        annotation, _, ask = _strip_markers(hints.get(p.name, Any))
        if ask is not None and p.name not in skip:
            asks[p.name] = _ask(p, annotation, ask)
    return asks


def convert_arguments(sig: ToolSignature, arguments: Mapping[str, object]) -> dict[str, object]:
    """Validate and convert `arguments` into handler keyword arguments.

    Unknown keys are ignored; omitted AskIfMissing parameters are absent from the result.
    Raises ArgumentsInvalid.
    """
    if sig.args_type is None:
        return sig.converter()(arguments)
    if not isinstance(arguments, Mapping):
        raise ArgumentsInvalid("Invalid arguments: expected an object")
    try:
        args = msgspec.convert(arguments, sig.args_type)
    except msgspec.ValidationError as exc:
        raise ArgumentsInvalid(f"Invalid arguments: {exc}") from None
    values = {}
    for name in sig.param_names:
        value = getattr(args, name)
        if value is not UNSET:
            values[name] = value
    return values


def docstring_summary(fn: Callable[..., object]) -> str | None:
    """The first paragraph of `fn`'s docstring, on one line."""
    doc = inspect.getdoc(fn)
    if not doc:
        return None
    return " ".join(doc.strip().split("\n\n", 1)[0].split()) or None
