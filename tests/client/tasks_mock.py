"""A scripted tasks-extension server for client tests: a handler for `mocks.MockServer`.

`tools/call` answers a CreateTaskResult (or first the MRTR rounds in `mrtr`); each `tasks/get`
answers the next state of `script` (the last one repeats forever). Like a real server it checks
`Mcp-Name: <taskId>` (-32020), the declared extension (-32021) and the task id (-32602).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .mocks import JSONDict, Reply, fail, ok

TASKS = "io.modelcontextprotocol/tasks"
TASK_ID = "task-7f3a"
STAMP = "2026-07-28T10:00:00Z"
State = JSONDict | Callable[["TaskServer"], JSONDict]


def working(message: str | None = None, poll_ms: int | None = None) -> JSONDict:
    state: JSONDict = {"status": "working"}
    if message is not None:
        state["statusMessage"] = message
    if poll_ms is not None:
        state["pollIntervalMs"] = poll_ms
    return state


def asking(*keys: str) -> JSONDict:
    requests = {k: {"method": "elicitation/create", "params": {
        "mode": "form", "message": f"question {k}?",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    }} for k in keys}
    return {"status": "input_required", "inputRequests": requests}


def completed(text: str = "done", is_error: bool = False) -> JSONDict:
    result: JSONDict = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return {"status": "completed", "result": result}


def failed(code: int = -32603, message: str = "Internal error") -> JSONDict:
    return {"status": "failed", "error": {"code": code, "message": message}}


def task_fields(status: str = "working", poll_ms: int | None = 1) -> JSONDict:
    base: JSONDict = {"taskId": TASK_ID, "status": status, "createdAt": STAMP,
                      "lastUpdatedAt": STAMP, "ttlMs": 60_000}
    if poll_ms is not None:
        base["pollIntervalMs"] = poll_ms
    return base


@dataclass
class TaskServer:
    """The scripted server; `gets`, `updates` and `cancels` record what the client sent."""

    script: list[State]
    poll_ms: int | None = 1  # on the CreateTaskResult
    mrtr: list[JSONDict] = field(default_factory=list)  # input_required results before the task
    raw_get: Callable[[JSONDict], JSONDict] | None = None  # replaces the whole tasks/get result
    raw_create: Callable[[JSONDict], JSONDict] | None = None  # replaces the CreateTaskResult
    rude: bool = False  # makes a task even for a client that did not declare the extension
    gets: int = 0
    calls: list[JSONDict] = field(default_factory=list)
    updates: list[JSONDict] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)

    def __call__(self, request: JSONDict, headers: dict[str, str]) -> Reply:
        method = request["method"]
        params: JSONDict = request["params"]
        caps = params["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        if method == "server/discover":
            return ok(request, {
                "resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "extensions": {TASKS: {}}},
                "ttlMs": 0, "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "tasks-mock",
                                                                 "version": "1"}}})
        if method == "tools/list":
            return ok(request, {"tools": [], "ttlMs": 60_000, "cacheScope": "private"})
        if method == "tools/call":
            return self._call(request, caps)
        if TASKS not in caps.get("extensions", {}):
            return fail(request, -32021, "tasks not declared",
                        {"requiredCapabilities": {"extensions": {TASKS: {}}}})
        if headers.get("mcp-name") != params.get("taskId"):
            return fail(request, -32020, "Mcp-Name does not match taskId")
        if params["taskId"] != TASK_ID:
            return fail(request, -32602, "unknown task", status=200)
        if method == "tasks/get":
            return ok(request, self._get())
        if method == "tasks/update":
            self.updates.append(params["inputResponses"])
        elif method == "tasks/cancel":
            self.cancels.append(params["taskId"])
        return ok(request, {"resultType": "complete"})

    def _call(self, request: JSONDict, caps: JSONDict) -> Reply:
        self.calls.append(request["params"])
        round_no = len(self.calls)
        if round_no <= len(self.mrtr):
            return ok(request, {"resultType": "input_required", **self.mrtr[round_no - 1]})
        if TASKS not in caps.get("extensions", {}) and not self.rude:
            return ok(request, {"content": [{"type": "text", "text": "sync"}]})
        created: JSONDict = {"resultType": "task", **task_fields(poll_ms=self.poll_ms)}
        return ok(request, self.raw_create(created) if self.raw_create else created)

    def _get(self) -> JSONDict:
        self.gets += 1
        step = self.script[min(self.gets, len(self.script)) - 1]
        state = step(self) if callable(step) else step
        result: JSONDict = {**task_fields(poll_ms=self.poll_ms), **state,
                            "resultType": "complete"}
        return self.raw_get(result) if self.raw_get is not None else result

