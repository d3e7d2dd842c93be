"""Tests for the wire Structs, the method table and the public API of mrtr.protocol."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import msgspec
import pytest

import mrtr.protocol as p
from mrtr import errors

PROTOCOL_DIR = Path(p.__file__).parent
META = p.RequestMeta(
    protocol_version=p.PROTOCOL_VERSION, client_capabilities=p.ClientCapabilities()
)


def wire(obj: object) -> object:
    return json.loads(p.encode(obj))


def test_public_api_is_sorted_and_ours() -> None:
    assert p.__all__ == sorted(p.__all__, key=str.casefold)
    assert len(set(p.__all__)) == len(p.__all__)
    for name in p.__all__:
        obj = getattr(p, name)
        # JSON aliases are typing.Any; UNSET and UnsetType are re-exported from msgspec.
        if isinstance(obj, type) and obj.__module__ not in ("typing", "msgspec"):
            assert obj.__module__.startswith("mrtr"), name


def test_modules_are_small_and_future_annotated() -> None:
    for path in PROTOCOL_DIR.glob("*.py"):
        source = path.read_text()
        assert len(source.splitlines()) < 400, path.name
        tree = ast.parse(source)
        assert ast.get_docstring(tree), path.name
        if path.name != "__init__.py" or "import" in source:
            assert "from __future__ import annotations" in source, path.name


def test_constants() -> None:
    assert p.PROTOCOL_VERSION == "2026-07-28"
    assert p.SUPPORTED_VERSIONS == ("2026-07-28",)
    assert p.PROTOCOL_VERSION_KEY == "io.modelcontextprotocol/protocolVersion"
    assert p.SUBSCRIPTION_ID_KEY == "io.modelcontextprotocol/subscriptionId"
    assert p.TASKS_EXTENSION == "io.modelcontextprotocol/tasks"


def test_request_meta_wire_names_and_absent_fields() -> None:
    meta = p.RequestMeta(
        protocol_version="2026-07-28",
        client_capabilities=p.ClientCapabilities(elicitation={}, sampling={"tools": {}}),
        progress_token=5,
    )
    assert wire(meta) == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "sampling": {"tools": {}},
        },
        "progressToken": 5,
    }


def test_structs_are_frozen_and_keyword_only() -> None:
    tool = p.Tool(name="t", input_schema={"type": "object"})
    with pytest.raises(AttributeError):
        tool.name = "u"  # type: ignore[misc]
    with pytest.raises(TypeError):
        p.Tool("t", {"type": "object"})  # type: ignore[call-arg]


def test_method_and_type_properties_read_the_tag() -> None:
    call = p.CallToolRequest(id=1, params=p.CallToolRequestParams(name="x", meta=META))
    assert call.method == "tools/call"
    assert p.ElicitRequest(params=p.ElicitRequestURLParams(message="m", url="u")).method == (
        "elicitation/create"
    )
    assert p.TextContent(text="x").type == "text"
    assert p.ResourceTemplateReference(uri="a/{b}").type == "ref/resource"


def test_results_always_write_result_type() -> None:
    assert wire(p.EmptyResult()) == {"resultType": "complete"}
    assert wire(p.InputRequiredResult(request_state="s")) == {
        "resultType": "input_required",
        "requestState": "s",
    }
    task = p.CreateTaskResult(
        task_id="t", status="working", created_at="a", last_updated_at="b", ttl_ms=None
    )
    assert wire(task)["resultType"] == "task"  # type: ignore[index]
    assert "requestState" not in wire(task)  # type: ignore[operator]


def test_cacheable_results_always_write_ttl_and_scope() -> None:
    assert wire(p.ListToolsResult(tools=[])) == {
        "resultType": "complete",
        "tools": [],
        "ttlMs": 0,
        "cacheScope": "private",
    }


def test_elicit_constructors_encode_like_the_spec_shapes() -> None:
    schema = p.requested_schema({"name": p.StringSchema(min_length=1)}, required=["name"])
    form = p.ElicitRequestFormParams(message="who?", requested_schema=schema)
    assert wire(form) == {
        "mode": "form",
        "message": "who?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1}},
            "required": ["name"],
        },
    }
    implicit = p.ElicitRequestFormParams(message="m", requested_schema=schema, explicit_mode=False)
    assert "mode" not in wire(implicit)  # type: ignore[operator]
    url = p.ElicitRequestURLParams(message="go", url="https://x.example")
    assert wire(url) == {"mode": "url", "message": "go", "url": "https://x.example"}
    assert isinstance(form, p.ElicitRequestParams)


def test_input_request_union_decodes_by_method() -> None:
    asks = p.decode(
        b'{"a":{"method":"roots/list"},"b":{"method":"elicitation/create","params":'
        b'{"message":"m","requestedSchema":{"type":"object","properties":{}}}}}',
        dict[str, p.InputRequest],
    )
    assert isinstance(asks["a"], p.ListRootsRequest)
    assert isinstance(asks["b"], p.ElicitRequest)
    assert asks["b"].params.mode is p.UNSET


@pytest.mark.parametrize(
    ("status", "member"),
    [("input_required", "inputRequests"), ("completed", "result"), ("failed", "error")],
)
def test_detailed_task_requires_its_status_member(status: p.TaskStatus, member: str) -> None:
    body = {
        "taskId": "t",
        "status": status,
        "createdAt": "a",
        "lastUpdatedAt": "b",
        "ttlMs": 1000,
        "resultType": "complete",
    }
    with pytest.raises(msgspec.ValidationError, match=member.replace("R", "_r").lower()):
        p.decode(json.dumps(body).encode(), p.GetTaskResult)
    with pytest.raises(ValueError):
        p.DetailedTask(
            task_id="t",
            status=status,
            created_at="a",
            last_updated_at="b",
            ttl_ms=None,
        )


def test_method_table() -> None:
    assert set(p.METHODS) == {
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "subscriptions/listen",
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
    }
    assert {m for m, s in p.METHODS.items() if s.may_input_required} == {
        "tools/call",
        "prompts/get",
        "resources/read",
    }
    assert {m for m, s in p.METHODS.items() if s.may_create_task} == {"tools/call"}
    assert p.METHODS["resources/read"].name_field == "uri"
    assert p.METHODS["tasks/get"].name_field == "taskId"
    assert p.METHODS["completion/complete"].server_capability == "completions"
    assert p.METHODS["tasks/cancel"].required_capability() == {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    }
    assert p.METHODS["tools/call"].required_capability() is None
    assert not set(p.METHODS) & p.REMOVED_METHODS
    with pytest.raises(TypeError):
        p.METHODS["x"] = p.METHODS["tools/call"]  # type: ignore[index]


def test_method_spec_types_agree() -> None:
    for method, spec in p.METHODS.items():
        assert spec.request_type.__struct_config__.tag == method
        assert "params" in spec.request_type.__struct_fields__
        assert "meta" in spec.params_type.__struct_fields__


def test_check_version() -> None:
    p.check_version(META)
    with pytest.raises(errors.UnsupportedProtocolVersion):
        p.check_version(msgspec.structs.replace(META, protocol_version="2025-11-25"))


def test_resource_contents_resolve_by_key() -> None:
    blob = p.decode(
        b'{"contents":[{"uri":"a","blob":"AA=="},{"uri":"b","text":"t"}]}', p.ReadResourceResult
    )
    assert isinstance(blob.contents[0], p.BlobResourceContents)
    assert isinstance(blob.contents[1], p.TextResourceContents)
    assert isinstance(blob.contents[0], p.ResourceContents)
