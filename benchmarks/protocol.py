"""Requests through `mrtr serve`'s real HTTP protocol, with a fake transport (no sockets).

`python -m benchmarks.protocol [--workload call1|list] [--requests N] [--connections C]
[--parser httptools|h11|stock]`

Each of C connections is a real protocol instance of `mrtr serve` (uvicorn's httptools protocol
with mrtr's Deadlines and direct path; `stock` is uvicorn's own) fed one whole request per turn,
as a client on a socket would; the loop runs until every connection has its reply. Prints the
CPU µs per request; for instruction counts run it under callgrind twice (`--requests 0` and N)
and divide the difference by N:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python -m benchmarks.protocol -n 2000
"""

# Design: the request bytes are what the shared harness's raw client sends (benchmarks README),
# so the parser sees the same headers; the app is McpApp around the benchmark server with no
# store (the HTTP layer is what this measures; benchmarks.rounds measures the stores).
from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import msgspec

from benchmarks.rounds import META
from benchmarks.server import app as bench_app
from mrtr.http import McpApp
from mrtr.protocol import PROTOCOL_VERSION
from mrtr.server import Dispatcher

__all__ = ["main", "measure"]


def request_bytes(workload: str) -> bytes:
    """One whole HTTP request of `workload` (call1 or list), as the harness's raw client sends."""
    if workload == "call1":
        params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hello"}, "_meta": META}
        method, name = "tools/call", "echo"
    else:
        params, method, name = {"_meta": META}, "tools/list", None
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    head = ("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"MCP-Protocol-Version: {PROTOCOL_VERSION}\r\nMcp-Method: {method}\r\n"
            + (f"Mcp-Name: {name}\r\n" if name else "")
            + f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body


class FakeTransport(asyncio.Transport):
    """Counts the replies written (each starts with a status line)."""

    def __init__(self) -> None:
        super().__init__()
        self.replies = 0
        self.failures = 0  # replies that are not 200
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if bytes(data[:9]) == b"HTTP/1.1 ":
            self.replies += 1
            self.failures += bytes(data[9:13]) != b"200 "

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 9000), "peername": ("127.0.0.1", 50000)}.get(
            name, default)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def measure(workload: str, requests: int, connections: int, parser: str) -> float:
    """CPU µs per request over `requests` requests on `connections` connections."""
    from uvicorn.server import ServerState

    from mrtr.serving._connections import ConnectionLimits
    from mrtr.serving._uvicorn import BoundedConfig, protocol_class

    app = McpApp(Dispatcher(bench_app))
    http: Any = "httptools" if parser == "stock" else protocol_class(parser)
    config = BoundedConfig(app, limits=ConnectionLimits(), http=http, lifespan="off",
                           access_log=False, server_header=False, log_level="warning",
                           proxy_headers=False)  # as `mrtr serve` without --forwarded-allow-ips
    config.load()
    state = ServerState()
    state.default_headers = [(b"date", b"Wed, 02 Dec 2026 05:00:00 GMT")]
    loop = asyncio.get_running_loop()
    pairs = []
    for _ in range(connections):
        transport = FakeTransport()
        protocol: Any = config.http_protocol_class(config, state, {}, loop)
        protocol.connection_made(transport)
        pairs.append((protocol, transport))
    raw = request_bytes(workload)
    done = 0
    start = time.process_time()
    while done < requests:
        turn = min(connections, requests - done)
        for protocol, _ in pairs[:turn]:
            protocol.data_received(raw)
        expected = [t.replies + 1 for _, t in pairs[:turn]]
        while any(t.replies < n for (_, t), n in zip(pairs[:turn], expected, strict=True)):
            await asyncio.sleep(0)
        done += turn
    elapsed = time.process_time() - start
    failures = sum(t.failures for _, t in pairs)
    if failures:
        raise RuntimeError(f"{failures} of {requests} replies were not 200")
    for protocol, transport in pairs:
        transport.close()
        protocol.connection_lost(None)
    return elapsed / max(requests, 1) * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", "-w", default="call1", choices=("call1", "list"))
    parser.add_argument("--requests", "-n", type=int, default=20000)
    parser.add_argument("--connections", "-c", type=int, default=32)
    parser.add_argument("--parser", default="httptools", choices=("httptools", "h11", "stock"))
    args = parser.parse_args(argv)
    per = asyncio.run(measure(args.workload, args.requests, args.connections, args.parser))
    print(f"{args.workload} {args.parser}: {per:.1f} µs CPU per request")


if __name__ == "__main__":
    main()
