"""Tests for mrtr.protocol._codec: the two decoders, their error classification, the encoders."""

from __future__ import annotations

import json

import pytest

import mrtr.protocol as p
from mrtr import errors

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def request(method: str = "tools/call", **extra: object) -> dict[str, object]:
    params: dict[str, object] = {"_meta": META, "name": "echo"}
    msg: dict[str, object] = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    msg.update(extra)
    return msg


def raw(obj: object) -> bytes:
    return json.dumps(obj).encode()


def raises(exc: type[errors.ProtocolError], data: bytes) -> errors.ProtocolError:
    with pytest.raises(exc) as info:
        p.decode_client_message(data)
    assert type(info.value) is exc
    return info.value


# -- decode_client_message: fast path -----------------------------------------------------------


def test_decodes_call_tool_request() -> None:
    msg = p.decode_client_message(
        raw(request(params={"_meta": META, "name": "x", "arguments": {}}))
    )
    assert isinstance(msg, p.CallToolRequest)
    assert msg.method == "tools/call"
    assert msg.id == 7
    assert msg.params.meta.protocol_version == "2026-07-28"
    assert msg.params.input_responses is p.UNSET


def test_decodes_every_request_method() -> None:
    params: dict[str, dict[str, object]] = {
        "tools/call": {"name": "x"},
        "prompts/get": {"name": "x"},
        "resources/read": {"uri": "file:///a"},
        "completion/complete": {
            "ref": {"type": "ref/prompt", "name": "p"},
            "argument": {"name": "a", "value": "v"},
        },
        "subscriptions/listen": {"notifications": {"toolsListChanged": True}},
        "tasks/get": {"taskId": "t"},
        "tasks/cancel": {"taskId": "t"},
        "tasks/update": {"taskId": "t", "inputResponses": {"k": {"action": "decline"}}},
    }
    for method, spec in p.METHODS.items():
        body: dict[str, object] = {"jsonrpc": "2.0", "id": "a", "method": method}
        body["params"] = {"_meta": META, **params.get(method, {})}
        msg = p.decode_client_message(raw(body))
        assert type(msg) is spec.request_type
        assert msg.method == method


def test_decodes_cancelled_notification() -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
    msg = p.decode_client_message(raw(body))
    assert isinstance(msg, p.CancelledNotification)
    assert msg.params.request_id == 3


def test_unknown_notification_is_returned_to_be_ignored() -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"a": 1}}
    msg = p.decode_client_message(raw(body))
    assert msg == p.UnknownNotification(method="notifications/whatever", params={"a": 1})


def test_fast_path_does_not_check_version() -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}
    msg = p.decode_client_message(raw(request(params={"_meta": meta, "name": "x"})))
    assert isinstance(msg, p.CallToolRequest)
    with pytest.raises(errors.UnsupportedProtocolVersion) as info:
        p.check_version(msg.params.meta)
    assert info.value.supported == ["2026-07-28"]
    assert info.value.requested == "2025-11-25"


def test_unknown_meta_keys_are_tolerated() -> None:
    meta = {**META, "vendor.example/x": 1, "traceparent": "00-ab-cd-01"}
    msg = p.decode_client_message(raw(request(params={"_meta": meta, "name": "x"})))
    assert isinstance(msg, p.CallToolRequest)
    assert msg.params.meta.traceparent == "00-ab-cd-01"


# -- decode_client_message: classification ------------------------------------------------------


@pytest.mark.parametrize("data", [b"", b"{", b"\xff\xfe", b"[1,", b"nul"])
def test_not_json_is_parse_error(data: bytes) -> None:
    assert raises(errors.ParseError, data).request_id is None


@pytest.mark.parametrize("data", [b"[]", b"1", b'"x"', b"null", b"[{}]"])
def test_not_an_object_is_invalid_request(data: bytes) -> None:
    assert raises(errors.InvalidRequest, data).request_id is None


@pytest.mark.parametrize("bad", [None, "1.0", 2, {}])
def test_bad_jsonrpc_is_invalid_request_with_id(bad: object) -> None:
    assert raises(errors.InvalidRequest, raw(request(jsonrpc=bad))).request_id == 7


def test_missing_jsonrpc_is_tolerated() -> None:
    # Design decision: `jsonrpc` has a constant default, so an absent member decodes (and is
    # written back on encode); only a wrong value is rejected.
    body = request()
    del body["jsonrpc"]
    assert isinstance(p.decode_client_message(raw(body)), p.CallToolRequest)


@pytest.mark.parametrize("bad_id", [None, 1.5, True, False, [], {}])
def test_bad_id_is_invalid_request_without_id(bad_id: object) -> None:
    assert raises(errors.InvalidRequest, raw(request(id=bad_id))).request_id is None


def test_missing_method_or_request_id_is_invalid_request() -> None:
    no_method, no_id = request(), request()
    del no_method["method"], no_id["id"]
    assert raises(errors.InvalidRequest, raw(no_method)).request_id == 7
    assert raises(errors.InvalidRequest, raw(no_id)).request_id is None


def test_missing_meta_is_invalid_params() -> None:
    err = raises(errors.InvalidParams, raw(request(params={"name": "x"})))
    assert err.request_id == 7
    assert "_meta" in err.message


def test_missing_params_is_invalid_params() -> None:
    body = request()
    del body["params"]
    assert raises(errors.InvalidParams, raw(body)).request_id == 7


@pytest.mark.parametrize(
    "key", ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"]
)
def test_missing_required_meta_field_is_invalid_params(key: str) -> None:
    meta = {k: v for k, v in META.items() if k != key}
    err = raises(errors.InvalidParams, raw(request(params={"_meta": meta, "name": "x"})))
    assert key in err.message
    assert err.request_id == 7


def test_missing_meta_field_wins_over_unsupported_version() -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "1999-01-01"}
    raises(errors.InvalidParams, raw(request(params={"_meta": meta, "name": "x"})))


def test_malformed_meta_is_invalid_params() -> None:
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": {"sampling": 3}}
    err = raises(errors.InvalidParams, raw(request(id="s", params={"_meta": meta, "name": "x"})))
    assert err.request_id == "s"


def test_unsupported_version_on_failure_path() -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "1999-01-01"}
    err = raises(errors.UnsupportedProtocolVersion, raw(request(params={"_meta": meta})))
    assert isinstance(err, errors.UnsupportedProtocolVersion)
    assert err.requested == "1999-01-01"
    assert err.supported == list(p.SUPPORTED_VERSIONS)
    assert err.request_id == 7


def test_unsupported_version_on_unknown_method() -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "1999-01-01"}
    raises(errors.UnsupportedProtocolVersion, raw(request("nope/x", params={"_meta": meta})))


@pytest.mark.parametrize("method", sorted(p.REMOVED_METHODS - {"notifications/initialized"}))
def test_removed_method_is_method_not_found(method: str) -> None:
    assert raises(errors.MethodNotFound, raw(request(method))).request_id == 7


def test_unknown_method_without_meta_is_method_not_found() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "x"}}
    assert raises(errors.MethodNotFound, raw(body)).request_id == 1


@pytest.mark.parametrize("with_meta", [False, True])
def test_initialize_refused_names_the_supported_versions_issue_12(with_meta: bool) -> None:
    body = request("initialize") if with_meta else {"jsonrpc": "2.0", "id": 1,
                                                   "method": "initialize", "params": {}}
    err = raises(errors.MethodNotFound, raw(body))
    assert err.data == {"supported": ["2026-07-28"]} and "2026-07-28" in err.message


def test_unknown_method_with_meta_is_method_not_found() -> None:
    err = raises(errors.MethodNotFound, raw(request("tools/frobnicate")))
    assert "tools/frobnicate" in err.message


def test_bad_params_is_invalid_params_with_msgspec_message() -> None:
    err = raises(errors.InvalidParams, raw(request(params={"_meta": META, "name": 5})))
    assert "$.params.name" in err.message
    assert err.request_id == 7


@pytest.mark.parametrize("bad", [12345, None, "x", [], {"k": 12345}, {"k": None}])
def test_malformed_input_responses_is_invalid_params(bad: object) -> None:
    params = {"_meta": META, "name": "x", "inputResponses": bad}
    raises(errors.InvalidParams, raw(request(params=params)))


def test_malformed_cancelled_notification_is_invalid_params() -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1.5}}
    raises(errors.InvalidParams, raw(body))


def test_string_id_is_echoed() -> None:
    assert raises(errors.InvalidParams, raw(request(id="abc", params={}))).request_id == "abc"


# -- encoders ----------------------------------------------------------------------------------


def test_encode_result_is_a_full_response() -> None:
    result = p.CallToolResult(content=[p.TextContent(text="hi")])
    assert json.loads(p.encode_result(3, result)) == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"resultType": "complete", "content": [{"type": "text", "text": "hi"}]},
    }


def test_encode_error_with_and_without_id() -> None:
    err = errors.UnsupportedProtocolVersion(["2026-07-28"], "1")
    body = json.loads(p.encode_error("r", err))
    assert body == {
        "jsonrpc": "2.0",
        "id": "r",
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "1"},
        },
    }
    assert "id" not in json.loads(p.encode_error(None, errors.ParseError()))


def test_encode_error_drops_unencodable_data() -> None:
    body = json.loads(p.encode_error(1, errors.InternalError("boom", data=object())))
    assert body["error"] == {"code": -32603, "message": "boom"}


def test_encode_message_writes_method_and_jsonrpc() -> None:
    note = p.ToolListChangedNotification()
    assert json.loads(p.encode_message(note)) == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
    }


# -- decode_server_message ---------------------------------------------------------------------


def response(result: object, rid: object = 1) -> bytes:
    return raw({"jsonrpc": "2.0", "id": rid, "result": result})


def test_complete_result_decodes_as_method_result() -> None:
    reply = p.decode_server_message(
        response({"resultType": "complete", "content": []}), "tools/call"
    )
    assert isinstance(reply, p.JSONRPCResultResponse)
    assert reply.result == p.CallToolResult(content=[])
    assert reply.id == 1


def test_absent_result_type_means_complete() -> None:
    reply = p.decode_server_message(response({"tools": []}), "tools/list")
    assert isinstance(reply, p.JSONRPCResultResponse)
    assert isinstance(reply.result, p.ListToolsResult)
    assert reply.result.ttl_ms == 0


def test_input_required_result() -> None:
    asks = {"k": {"method": "roots/list"}}
    body = response({"resultType": "input_required", "inputRequests": asks, "requestState": "s"})
    reply = p.decode_server_message(body, "prompts/get")
    assert isinstance(reply, p.JSONRPCResultResponse)
    assert reply.result == p.InputRequiredResult(
        input_requests={"k": p.ListRootsRequest()}, request_state="s"
    )


def test_input_required_is_invalid_for_other_methods() -> None:
    body = response({"resultType": "input_required", "requestState": "s"}, rid="x")
    with pytest.raises(errors.InvalidRequest) as info:
        p.decode_server_message(body, "tools/list")
    assert info.value.request_id == "x"


def test_task_result_only_for_tools_call() -> None:
    task = {
        "resultType": "task",
        "taskId": "t",
        "status": "working",
        "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z",
        "ttlMs": None,
    }
    reply = p.decode_server_message(response(task), "tools/call")
    assert isinstance(reply, p.JSONRPCResultResponse)
    assert isinstance(reply.result, p.CreateTaskResult)
    with pytest.raises(errors.InvalidRequest):
        p.decode_server_message(response(task), "prompts/get")


def test_unknown_result_type_is_invalid_request() -> None:
    with pytest.raises(errors.InvalidRequest) as info:
        p.decode_server_message(response({"resultType": "later", "content": []}), "tools/call")
    assert info.value.request_id == 1


def test_bad_result_shape_is_invalid_request() -> None:
    results: list[object] = [{"content": 3}, [], "x", {"resultType": 5}]
    for result in results:
        with pytest.raises(errors.InvalidRequest):
            p.decode_server_message(response(result), "tools/call")


def test_error_response() -> None:
    body = raw({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "bad"}})
    reply = p.decode_server_message(body, "tools/call")
    assert reply == p.JSONRPCErrorResponse(id=4, error=p.ErrorObject(code=-32602, message="bad"))
    assert isinstance(reply, p.JSONRPCErrorResponse)
    assert isinstance(errors.from_wire(reply.error), errors.InvalidParams)


def test_server_notification_and_unknown_notification() -> None:
    body = raw(
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "t", "progress": 0.5},
        }
    )
    note = p.decode_server_message(body, "tools/call")
    assert isinstance(note, p.ProgressNotification)
    other = raw({"jsonrpc": "2.0", "method": "notifications/x", "params": [1]})
    assert p.decode_server_message(other, "tools/call") == p.UnknownNotification(
        method="notifications/x", params=[1]
    )


def test_server_request_is_invalid() -> None:
    body = raw({"jsonrpc": "2.0", "id": 1, "method": "roots/list"})
    with pytest.raises(errors.InvalidRequest):
        p.decode_server_message(body, "tools/call")


def test_server_side_parse_error_and_unknown_method() -> None:
    with pytest.raises(errors.ParseError):
        p.decode_server_message(b"{", "tools/call")
    with pytest.raises(errors.MethodNotFound):
        p.decode_server_message(response({}), "nope")


# -- decode_input_response ---------------------------------------------------------------------


def test_decode_input_response_by_method() -> None:
    elicit = p.decode_input_response(
        "elicitation/create", {"action": "accept", "content": {"a": 1}}
    )
    assert elicit == p.ElicitResult(action="accept", content={"a": 1})
    roots = p.decode_input_response("roots/list", {"roots": [{"uri": "file:///a"}]})
    assert roots == p.ListRootsResult(roots=[p.Root(uri="file:///a")])
    sample = {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}
    assert isinstance(
        p.decode_input_response("sampling/createMessage", sample), p.CreateMessageResult
    )


@pytest.mark.parametrize(
    ("method", "obj"),
    [
        ("elicitation/create", {"action": "maybe"}),
        ("elicitation/create", {"action": "accept", "content": {"a": {"b": 1}}}),
        ("roots/list", {}),
        ("sampling/createMessage", {"role": "assistant"}),
        ("tools/call", {}),
    ],
)
def test_decode_input_response_rejects(method: str, obj: p.JSONObject) -> None:
    with pytest.raises(errors.InvalidParams):
        p.decode_input_response(method, obj)
