"""A scripted stdio MCP server for client transport tests (run as a subprocess)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

CANCELLED: list[object] = []


def reply(request: dict[str, Any], result: dict[str, Any]) -> None:
    write({"jsonrpc": "2.0", "id": request["id"], "result": result})


def write(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(value: str) -> dict[str, Any]:
    return {"resultType": "complete", "content": [{"type": "text", "text": value}]}


async def handle(request: dict[str, Any]) -> None:
    method = request["method"]
    params = request.get("params", {})
    if method == "notifications/cancelled":
        CANCELLED.append(params["requestId"])
        return
    if method == "server/discover":
        reply(request, {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                        "capabilities": {"tools": {}}})
        return
    if method == "tools/list":
        reply(request, {"tools": [{"name": "sleep", "inputSchema": {"type": "object"}}]})
        return
    name, args = params["name"], params.get("arguments", {})
    if name == "sleep":
        token = params["_meta"].get("progressToken")
        if token is not None:
            write({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": token, "progress": 1}})
        await asyncio.sleep(args["seconds"])
        reply(request, text(f"slept {args['seconds']}"))
    elif name == "cancelled":
        reply(request, text(json.dumps(CANCELLED)))
    elif name == "ask":
        if "inputResponses" in params:
            reply(request, text(params["inputResponses"]["q"]["content"]["answer"]))
        else:
            reply(request, {"resultType": "input_required", "requestState": "s", "inputRequests": {
                "q": {"method": "elicitation/create", "params": {
                    "message": "?", "requestedSchema": {"type": "object", "properties": {
                        "answer": {"type": "string"}}}}}}})
    elif name == "exit":
        sys.exit(3)


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    tasks = set()
    while line := await reader.readline():
        task = asyncio.create_task(handle(json.loads(line)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


if __name__ == "__main__":
    asyncio.run(main())
