"""One error tree, one error policy (#24).

Every public exception is a MrtrError; only mrtr.server._failures turns exceptions into wire
errors, HTTP refusals and `isError` results; transports, the session code, tasks and auth raise
or return, and write what the policy gives them. Both rules are checked here, over the source.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import logging
from pathlib import Path

import msgspec
import pytest

from mrtr.errors import (
    AuthUnavailable,
    Forbidden,
    InternalError,
    MrtrError,
    Unauthorized,
)
from mrtr.server._asks import StartTask, Suspend
from mrtr.server._failures import auth_refusal, http_refusal, not_found, scope_refusal

SRC = Path(__file__).resolve().parents[1] / "src" / "mrtr"

PUBLIC = ["mrtr", "mrtr.errors", "mrtr.protocol", "mrtr.server", "mrtr.client",
          "mrtr.client.auth", "mrtr.auth", "mrtr.stores", "mrtr.http", "mrtr.stdio",
          "mrtr.serving", "mrtr.testing", "mrtr.check"]
# Control flow, like CancelledError: they must pass `except Exception` in user code untouched.
CONTROL_FLOW = {Suspend, StartTask}


def public_exceptions() -> dict[type[BaseException], list[str]]:
    found: dict[type[BaseException], list[str]] = {}
    for name in PUBLIC:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                found.setdefault(obj, []).append(f"{name}.{attr}")
    return found


def test_every_public_exception_is_an_mrtr_error() -> None:
    found = public_exceptions()
    outside = sorted(where[0] for cls, where in found.items()
                     if not issubclass(cls, MrtrError) and cls not in CONTROL_FLOW)
    assert outside == []
    # The walk sees the classes that were outside the tree before #24.
    names = {cls.__name__ for cls in found}
    assert {"Declined", "ToolError", "FormInvalid", "InvalidToken", "UnknownKey",
            "AuthServerDown", "FrameTooLarge", "ToolHeaderError", "Unauthorized", "Forbidden",
            "AuthUnavailable"} <= names


def test_control_flow_stays_outside_exception() -> None:
    for cls in CONTROL_FLOW:
        assert not issubclass(cls, Exception) and not issubclass(cls, MrtrError)


def test_former_bases_are_kept_so_old_except_clauses_still_catch() -> None:
    from mrtr.protocol import FrameTooLarge, ToolHeaderError
    from mrtr.server import FormInvalid
    from mrtr.stores import StoreUnavailable

    for cls in (FrameTooLarge, ToolHeaderError, FormInvalid):
        assert issubclass(cls, ValueError) and issubclass(cls, MrtrError)
    assert issubclass(StoreUnavailable, InternalError)


# -- only the policy builds what goes out ---------------------------------------------------------

POLICY = "server/_failures.py"
# Define or encode, decide nothing: the codec's encode_error, Reply's encoding, the error classes.
ENCODERS = {"protocol/_codec.py", "server/_reply.py", "errors.py"}
SERVER_SIDE = ("server/", "http/", "stdio/", "auth/", "serving/", "stores/", "_app.py")
# Modules that write replies take every isError result from the policy, and the HTTP ones
# every error status and refusal header.
WRITERS = ("http/", "stdio/", "server/sessions/", "server/tasks/", "server/_dispatch.py",
           "server/_in_process.py")
HTTP = ("http/",)
_ERROR_HEADERS = {b"www-authenticate", b"retry-after", b"allow"}


def violations(source: str, path: str) -> list[str]:
    """What `source` (the module at `path`, relative to src/mrtr) builds that only the policy
    may build; [] when it only raises exceptions and writes what the policy returns."""
    if path == POLICY or path in ENCODERS or not path.startswith(SERVER_SIDE):
        return []
    writer, http = path.startswith(WRITERS), path.startswith(HTTP)
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        what = _built(node, writer=writer, http=http)
        if what is not None:
            found.append(f"{path}:{getattr(node, 'lineno', 0)}: {what}")
    return found


def _built(node: ast.AST, *, writer: bool, http: bool) -> str | None:
    """What `node` builds that it should have asked the policy for, or None."""
    if isinstance(node, ast.ImportFrom) and any(a.name == "encode_error" for a in node.names):
        return "imports encode_error"
    if isinstance(node, ast.Call):
        return _call(node, writer=writer)
    if isinstance(node, ast.ClassDef):
        for item in node.body:
            targets = item.targets if isinstance(item, ast.Assign) else (
                [item.target] if isinstance(item, ast.AnnAssign) else [])
            if any(isinstance(t, ast.Name) and t.id in ("code", "http_status") for t in targets):
                return f"defines a wire code ({node.name})"
        return None
    if isinstance(node, ast.Dict):
        keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
        return "builds an error object" if {"code", "message"} <= keys else None
    if http and isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value < 600:
            return f"an HTTP error status ({value})"
        if isinstance(value, bytes) and value.lower() in _ERROR_HEADERS:
            return f"a refusal header ({value.decode()})"
    return None


def _call(node: ast.Call, *, writer: bool) -> str | None:
    name = _called(node)
    if name in ("encode_error", "to_wire", "Refusal"):
        return f"calls {name}"
    if name == "Reply" and (len(node.args) > 2 or any(k.arg == "error" for k in node.keywords)):
        return "builds an error Reply"
    if writer and (name == "tool_error" or any(k.arg == "is_error" for k in node.keywords)):
        return "builds an isError result"
    return None


def _called(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def test_only_the_error_policy_builds_wire_errors_and_refusals() -> None:
    found = [v for path in sorted(SRC.rglob("*.py"))
             for v in violations(path.read_text(), path.relative_to(SRC).as_posix())]
    assert found == []


def test_the_policy_builds_them_indeed() -> None:
    # The exemption is not a blind spot: the policy module holds what the rule forbids elsewhere.
    source = (SRC / POLICY).read_text()
    assert violations(source, "server/_elsewhere.py")
    assert violations(source, "http/_elsewhere.py")


BAD = {
    "from mrtr.protocol import encode_error": "imports encode_error",
    "body = protocol.encode_error(None, error)": "calls encode_error",
    "wire = error.to_wire()": "calls to_wire",
    "reply = Reply(1, error=InternalError())": "builds an error Reply",
    "reply = Reply(1, None, InternalError())": "builds an error Reply",
    "raise Refusal(status, b'{}')": "calls Refusal",
    "class Gone(ProtocolError):\n    code = -32004": "defines a wire code (Gone)",
    "class Gone(ProtocolError):\n    http_status: int = GONE": "defines a wire code (Gone)",
    "error = {'code': -32600, 'message': 'no'}": "builds an error object",
    "await exchange.respond(404, body)": "an HTTP error status (404)",
    "headers = [(b'WWW-Authenticate', b'Bearer')]": "a refusal header (WWW-Authenticate)",
    "headers = [(b'retry-after', b'5')]": "a refusal header (retry-after)",
    "result = tool_error('no')": "builds an isError result",
    "result = CallToolResult(content=[], is_error=True)": "builds an isError result",
}


@pytest.mark.parametrize("snippet", sorted(BAD))
def test_the_rule_catches_each_kind_of_violation(snippet: str) -> None:
    found = violations(snippet, "http/_app.py")
    assert len(found) == 1 and found[0].endswith(BAD[snippet]), found


def test_the_rule_lets_code_raise_and_write_what_the_policy_returns() -> None:
    fine = ("raise InvalidParams('Invalid params: uri must be a string')\n"
            "reply = Reply(request.id, result)\n"
            "refusal = http_refusal(exc, log)\n"
            "await exchange.respond(refusal.status, refusal.body, refusal.headers)\n"
            "await exchange.respond(200, body)\n")
    assert violations(fine, "http/_app.py") == []
    # The status and header rules bind the HTTP modules, not the whole server.
    assert violations("limit = 404", "server/tasks/_records.py") == []
    assert violations("encode_error(None, e)", "client/_session.py") == []  # the client decodes


# -- the policy's HTTP refusals -----------------------------------------------------------------

def test_auth_refusals_carry_their_challenge_or_retry_after() -> None:
    plain = auth_refusal(Unauthorized("Unauthorized: token", challenge='Bearer x="1"'))
    assert (plain.status, plain.headers) == (401, [(b"www-authenticate", b'Bearer x="1"')])
    assert msgspec.json.decode(plain.body) == {
        "jsonrpc": "2.0", "error": {"code": -32600, "message": "Unauthorized: token"}}
    down = auth_refusal(AuthUnavailable("Service Unavailable", challenge=""))
    assert (down.status, down.headers) == (503, [(b"retry-after", b"5")])
    assert auth_refusal(Unauthorized("no", challenge="")).headers == []


def test_a_scope_refusal_is_the_same_body_with_or_without_a_guard() -> None:
    guarded = auth_refusal(Forbidden("Forbidden: insufficient scope", challenge="Bearer",
                                     scopes=["b", "a"]), 7)
    plain = scope_refusal(7, {"b", "a"})
    assert guarded.status == plain.status == 403
    assert guarded.body == plain.body == (
        b'{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Forbidden: insufficient '
        b'scope","data":{"requiredScopes":["a","b"]}}}')
    assert guarded.headers == [(b"www-authenticate", b"Bearer")] and plain.headers == []


def test_an_unexpected_transport_error_is_500_with_the_reason_only_in_the_log(
        caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("tests.policy")
    secret = RuntimeError("db password is hunter2")
    with caplog.at_level(logging.ERROR, log.name):
        refusal = http_refusal(secret, log)
    assert refusal.status == 500 and b"hunter2" not in refusal.body
    assert caplog.records[0].exc_info is not None and caplog.records[0].exc_info[1] is secret
    passed = not_found("/mcp")
    assert http_refusal(passed, log) is passed


def test_the_2025_codes_are_picked_back_by_code() -> None:
    from mrtr.errors import ProtocolError, ResourceNotFound, SessionNotFound, from_wire

    gone = from_wire({"code": -32001, "message": "Session not found"})
    missing = from_wire({"code": -32002, "message": "Resource not found", "data": {"uri": "x:y"}})
    assert isinstance(gone, SessionNotFound) and gone.code == -32001
    assert isinstance(missing, ResourceNotFound) and missing.data == {"uri": "x:y"}
    assert isinstance(gone, ProtocolError) and isinstance(missing, ProtocolError)
