"""Hypothesis strategies for every wire Struct, derived from msgspec type info.

Fields are generated from their declared types; `OVERRIDES` adds what types cannot say but the
schema does (ranges, `{"type": "object"}` input schemas, status-consistent tasks...).
"""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.inspect as mi
from hypothesis import strategies as st

import mrtr.protocol as p

SAFE_INT = 2**53 - 1
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)
# Keys that never collide with a schema property name, so free-form objects stay valid.
KEYS = st.text("abc", min_size=1, max_size=3).map(lambda s: "x-" + s)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-SAFE_INT, SAFE_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
# The schema's JSONObject/JSONValue leave out null and non-integer numbers (a generator artefact),
# so free-form objects are drawn without them.
OBJECT_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.booleans() | st.integers(-SAFE_INT, SAFE_INT) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
JSON_OBJECTS = st.dictionaries(KEYS, OBJECT_VALUES, max_size=3)
UNIT = st.floats(0, 1)
TIMESTAMP = st.just("2026-07-28T12:00:00Z")


def _elicit_params() -> st.SearchStrategy[p.ElicitRequestParams]:
    schema = st.builds(
        p.requested_schema,
        st.dictionaries(KEYS, st.just(p.StringSchema()) | st.just(p.BooleanSchema()), max_size=2),
    )
    form = st.builds(
        p.ElicitRequestFormParams,
        message=TEXT,
        requested_schema=schema,
        explicit_mode=st.booleans(),
    )
    url = st.builds(p.ElicitRequestURLParams, message=TEXT, url=st.just("https://example.com/x"))
    return form | url


def _detailed(cls: type[p.DetailedTask]) -> st.SearchStrategy[Any]:
    def build(status: str, draw_fields: dict[str, Any]) -> Any:
        extra: dict[str, Any] = {
            "input_required": {"input_requests": draw_fields["asks"]},
            "completed": {"result": draw_fields["result"]},
            "failed": {"error": draw_fields["error"]},
        }.get(status, {})
        return cls(
            task_id=draw_fields["task_id"],
            status=status,  # type: ignore[arg-type]
            created_at="2026-07-28T12:00:00Z",
            last_updated_at="2026-07-28T12:00:01Z",
            ttl_ms=draw_fields["ttl"],
            **extra,
        )

    fields = st.fixed_dictionaries(
        {
            "task_id": TEXT,
            "ttl": st.none() | st.integers(0, SAFE_INT),
            "asks": st.dictionaries(KEYS, from_type(p.InputRequest), max_size=2),
            "result": JSON_OBJECTS,
            "error": from_type(p.ErrorObject),
        }
    )
    statuses = st.sampled_from(["working", "input_required", "completed", "failed", "cancelled"])
    return st.builds(build, statuses, fields)


def _struct_overrides() -> dict[type, st.SearchStrategy[Any]]:
    listen_meta = st.fixed_dictionaries(
        {"io.modelcontextprotocol/subscriptionId": st.integers(0, 9) | TEXT}
    )
    return {
        p.ElicitRequestParams: st.deferred(_elicit_params),
        p.DetailedTask: st.deferred(lambda: _detailed(p.DetailedTask)),
        p.GetTaskResult: st.deferred(lambda: _detailed(p.GetTaskResult)),
        p.TaskStatusNotificationParams: st.deferred(
            lambda: _detailed(p.TaskStatusNotificationParams)
        ),
        p.SubscriptionsListenResult: st.builds(p.SubscriptionsListenResult, meta=listen_meta),
    }


# (Struct, python field name) -> strategy
FIELD_OVERRIDES: dict[tuple[type, str], st.SearchStrategy[Any]] = {
    (p.Tool, "input_schema"): st.just({"type": "object"})
    | st.just({"type": "object", "properties": {"a": {"type": "string"}}}),
    (p.Annotations, "priority"): UNIT,
    (p.ModelPreferences, "cost_priority"): UNIT,
    (p.ModelPreferences, "speed_priority"): UNIT,
    (p.ModelPreferences, "intelligence_priority"): UNIT,
    (p.ElicitResult, "content"): st.dictionaries(
        KEYS, TEXT | st.integers(-SAFE_INT, SAFE_INT) | st.booleans() | st.lists(TEXT, max_size=2)
    ),
    (p.JSONRPCErrorResponse, "id"): st.integers(0, SAFE_INT) | TEXT,
    (p.Task, "created_at"): TIMESTAMP,
    (p.Task, "last_updated_at"): TIMESTAMP,
    (p.Task, "ttl_ms"): st.none() | st.integers(0, SAFE_INT),
    (p.CallToolRequestParams, "idempotency_key"): st.text(  # as decode accepts it
        st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=40),
}
_cls: type[msgspec.Struct]
for _cls in (
    p.CallToolRequestParams,
    p.GetPromptRequestParams,
    p.ReadResourceRequestParams,
    p.UpdateTaskRequestParams,
):
    FIELD_OVERRIDES[(_cls, "input_responses")] = st.deferred(
        lambda: st.dictionaries(KEYS, input_responses().map(msgspec.to_builtins), max_size=2)
    )
for _cls in (
    p.DiscoverResult,
    p.ListToolsResult,
    p.ListPromptsResult,
    p.ListResourcesResult,
    p.ListResourceTemplatesResult,
    p.ReadResourceResult,
):
    FIELD_OVERRIDES[(_cls, "ttl_ms")] = st.integers(0, SAFE_INT)

SKIPPED_FIELDS = frozenset({"jsonrpc", "result_type"})  # constant defaults, always written


def input_responses() -> st.SearchStrategy[Any]:
    """Any InputResponse (an untagged union, so not derivable from type info)."""
    return st.one_of(
        [from_type(t) for t in (p.ElicitResult, p.CreateMessageResult, p.ListRootsResult)]
    )


def from_type(tp: Any) -> st.SearchStrategy[Any]:
    """A strategy for any protocol type (Struct, union alias, container)."""
    return _from_info(mi.type_info(tp))


def _from_info(info: mi.Type) -> st.SearchStrategy[Any]:
    if isinstance(info, mi.StructType):
        return _struct(info)
    if isinstance(info, mi.UnionType):
        return st.one_of([_from_info(t) for t in info.types])
    if isinstance(info, mi.ListType):
        return st.lists(_from_info(info.item_type), max_size=2)
    if isinstance(info, mi.DictType):
        if isinstance(info.value_type, mi.AnyType):
            return JSON_OBJECTS
        return st.dictionaries(KEYS, _from_info(info.value_type), max_size=2)
    if isinstance(info, mi.CustomType):
        assert info.cls.__name__ == "ResourceContents"
        return from_type(p.TextResourceContents) | from_type(p.BlobResourceContents)
    return _scalar(info)


def _scalar(info: mi.Type) -> st.SearchStrategy[Any]:
    simple: dict[type, st.SearchStrategy[Any]] = {
        mi.StrType: TEXT,
        mi.IntType: st.integers(-SAFE_INT, SAFE_INT),
        mi.FloatType: st.floats(allow_nan=False, allow_infinity=False),
        mi.BoolType: st.booleans(),
        mi.NoneType: st.none(),
        mi.AnyType: JSON_VALUES,
    }
    if isinstance(info, mi.LiteralType):
        return st.sampled_from(info.values)
    return simple[type(info)]


def _struct(info: mi.StructType) -> st.SearchStrategy[Any]:
    cls = info.cls
    special = _struct_overrides().get(cls)
    if special is not None:
        return special
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for field in info.fields:
        if field.name in SKIPPED_FIELDS:
            continue
        strategy = _field(cls, field)
        (required if field.required else optional)[field.name] = strategy
    return st.fixed_dictionaries(required, optional=optional).map(lambda kw: cls(**kw))


def _field(cls: type, field: mi.Field) -> st.SearchStrategy[Any]:
    for klass in cls.__mro__:
        override = FIELD_OVERRIDES.get((klass, field.name))
        if override is not None:
            return override
    return st.deferred(lambda: _from_info(field.type))


def struct_classes() -> list[type[msgspec.Struct]]:
    """Every public concrete Struct class in mrtr.protocol."""
    bases = {p.Wire, p.MethodTagged, p.TypeTagged}
    return [
        obj
        for name in p.__all__
        if isinstance(obj := getattr(p, name), type)
        and issubclass(obj, msgspec.Struct)
        and obj not in bases
    ]
