"""A scripted MCP 2025 stdio server (initialize, server requests on stdout); run as a subprocess.

`--silent-discover` ignores `server/discover` (some servers drop unknown requests).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

LOG: list[dict[str, Any]] = []
WAITING: dict[object, asyncio.Future[dict[str, Any]]] = {}
SILENT = "--silent-discover" in sys.argv


def write(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(rid: object, value: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": value}]}}


async def ask(request: dict[str, Any]) -> dict[str, Any]:
    future = asyncio.get_running_loop().create_future()
    WAITING[request["id"]] = future
    write(request)
    return await asyncio.wait_for(future, 5)


ASKS: dict[str, dict[str, Any]] = {
    "sample": {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Capital?"}}],
        "maxTokens": 10}},
    "roots": {"method": "roots/list"},
    "weird": {"method": "weird/thing"},
    "elicit": {"method": "elicitation/create", "params": {"message": "Name?"}},
}


async def call(rid: object, name: str) -> None:
    if name in ASKS:
        answer = await ask({"jsonrpc": "2.0", "id": f"{name}-1", **ASKS[name]})
        write(text(rid, json.dumps(answer.get("result", answer.get("error")))))
    elif name == "ask":
        answer = await ask({"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create",
                            "params": {"message": "Name?", "requestedSchema": {
                                "type": "object", "properties": {"name": {"type": "string"}}}}})
        write(text(rid, json.dumps(answer["result"]["content"])))
    elif name == "log":
        write(text(rid, json.dumps(LOG)))
    else:
        write(text(rid, "ok"))


async def handle(message: dict[str, Any]) -> None:
    if "method" not in message:
        WAITING.pop(message["id"]).set_result(message)
        return
    LOG.append({"method": message["method"]})
    method, rid = message["method"], message.get("id")
    if method == "server/discover" and not SILENT:
        write({"jsonrpc": "2.0", "id": rid,
               "error": {"code": -32601, "message": "Method not found"}})
    elif method == "initialize":
        write({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "stdio-2025", "version": "1"}}})
    elif method == "tools/call":
        await call(rid, message["params"]["name"])


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
