"""Raw probes for `mrtr check`: one JSON-RPC exchange at a time, bounded in count and time."""

# Design: the checker must see what a well-behaved client hides (status codes, headers, stray
# requests on a stream, a missing resultType), so it speaks JSON-RPC itself over httpx or a
# stdio child instead of going through mrtr.client's flow engine. Every send goes through
# Budget, so a run never exceeds --max-requests or --seconds, whatever the server does.
from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from mrtr.protocol import SSEParser, derive_headers

__all__ = ["ANSWERS", "Budget", "BudgetExceeded", "Exchange", "HttpProbe", "Probe", "StdioProbe",
           "meta"]

VERSION = "2026-07-28"
_NAMED = ("tools/call", "prompts/get", "resources/read")
# What the checker declares on tool calls: every kind of input it can answer (see _values).
ANSWERS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


class BudgetExceeded(Exception):
    """The run reached --max-requests or --seconds; remaining rules are skipped."""


@dataclass
class Budget:
    """How many requests and seconds the run may still use."""

    requests: int
    seconds: float
    started: float = field(default_factory=time.monotonic)

    def spend(self) -> float:
        """Count one request; return the seconds left for it. Raises BudgetExceeded."""
        left = self.seconds - (time.monotonic() - self.started)
        if self.requests <= 0 or left <= 0:
            raise BudgetExceeded
        self.requests -= 1
        return left


@dataclass
class Exchange:
    """What one request brought back: the response, everything else seen, and HTTP facts."""

    response: dict[str, Any] | None = None
    others: list[dict[str, Any]] = field(default_factory=list)
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    event_stream: bool = False
    failure: str = ""
    # The kept connection or process that answered (`keep=True`), None for the shared one.
    channel: int | None = None

    @property
    def result(self) -> dict[str, Any] | None:
        value = (self.response or {}).get("result")
        return value if isinstance(value, dict) else None

    @property
    def error_code(self) -> int | None:
        error = (self.response or {}).get("error")
        code = error.get("code") if isinstance(error, dict) else None
        return code if isinstance(code, int) else None

    @property
    def pushed(self) -> list[dict[str, Any]]:
        """Server-to-client requests seen on this exchange (a method and an id)."""
        return [m for m in self.others if "method" in m and "id" in m]


def meta(capabilities: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The `_meta` every 2026-07-28 request carries."""
    return {"io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": dict(capabilities or {}),
            "io.modelcontextprotocol/clientInfo": {"name": "mrtr-check", "version": "1"}}


def _message(rid: int, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": dict(params)}


def _decode(text: str) -> list[dict[str, Any]]:
    try:
        value = json.loads(text)
    except ValueError:
        return []
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, dict)]


class Probe:
    """Common part: request ids, the budget, and sorting messages into an Exchange."""

    http = False

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self._ids = 0
        self._channels = 0

    def next_channel(self) -> int:
        self._channels += 1
        return self._channels

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    @staticmethod
    def sort(rid: int, messages: Sequence[dict[str, Any]], exchange: Exchange) -> Exchange:
        for message in messages:
            is_reply = message.get("id") == rid and "method" not in message
            # An error the server could not tie to our id (id null, or its own placeholder
            # such as "server-error") still answers it.
            orphan = "method" not in message and isinstance(message.get("error"), dict)
            if (is_reply or orphan) and exchange.response is None:
                exchange.response = message
            else:
                exchange.others.append(message)
        return exchange

    async def rpc(self, method: str, params: Mapping[str, Any], *, fresh: bool = False,
                  header_map: Mapping[str, str] | None = None, keep: bool = False) -> Exchange:
        """One request; `fresh` on a new connection or process, kept open with `keep` (the
        Exchange then names it as its `channel`)."""
        raise NotImplementedError

    async def rpc_on(self, channel: int | None, method: str, params: Mapping[str, Any], *,
                     header_map: Mapping[str, str] | None = None,
                     headers: Mapping[str, str] | None = None) -> Exchange:
        """One request on a kept channel (None: the shared connection or process); `headers`
        (HTTP only) replace the derived ones."""
        raise NotImplementedError

    async def notify_on(self, channel: int | None, method: str, params: Mapping[str, Any],
                        headers: Mapping[str, str] | None = None) -> None:
        """One notification on a kept channel; nothing is read back."""
        raise NotImplementedError

    async def release(self) -> None:
        """Close the kept channels."""

    async def aclose(self) -> None:
        """Release connections or stop child processes."""


class HttpProbe(Probe):
    """POSTs to one or more URLs; `fresh=True` opens a new connection for that request."""

    http = True

    def __init__(self, url: str, budget: Budget, *, timeout: float = 10.0) -> None:
        super().__init__(budget)
        self.url = url
        self.timeout = timeout
        self._client = httpx.AsyncClient(timeout=timeout)
        self._kept: dict[int, tuple[httpx.AsyncClient, str]] = {}

    def headers(self, method: str, params: Mapping[str, Any],
                header_map: Mapping[str, str] | None = None) -> dict[str, str]:
        name = params.get("name") if method != "resources/read" else params.get("uri")
        arguments = params.get("arguments") if method == "tools/call" else None
        derived = derive_headers(protocol_version=VERSION, method=method,
                                 name=str(name) if method in _NAMED and name is not None else None,
                                 arguments=arguments if isinstance(arguments, dict) else None,
                                 header_map=header_map or {})
        return {"Accept": "application/json, text/event-stream",
                "Content-Type": "application/json", **derived}

    async def rpc(self, method: str, params: Mapping[str, Any], *, fresh: bool = False,
                  header_map: Mapping[str, str] | None = None, keep: bool = False,
                  url: str | None = None, headers: Mapping[str, str] | None = None,
                  timeout: float | None = None) -> Exchange:
        rid = self.next_id()
        body = json.dumps(_message(rid, method, params)).encode()
        sent = headers if headers is not None else self.headers(method, params, header_map)
        if not (fresh and keep):
            return await self.send("POST", body, sent, rid=rid, fresh=fresh, url=url,
                                   timeout=timeout)
        channel = self.next_channel()
        self._kept[channel] = (httpx.AsyncClient(timeout=self.timeout), url or self.url)
        exchange = await self._on(channel, body, sent, rid)
        exchange.channel = channel
        return exchange

    async def rpc_on(self, channel: int | None, method: str, params: Mapping[str, Any], *,
                     header_map: Mapping[str, str] | None = None,
                     headers: Mapping[str, str] | None = None) -> Exchange:
        if channel not in self._kept:
            return await self.rpc(method, params, header_map=header_map, headers=headers)
        rid = self.next_id()
        body = json.dumps(_message(rid, method, params)).encode()
        sent = headers if headers is not None else self.headers(method, params, header_map)
        exchange = await self._on(channel, body, sent, rid)
        exchange.channel = channel
        return exchange

    async def notify_on(self, channel: int | None, method: str, params: Mapping[str, Any],
                        headers: Mapping[str, str] | None = None) -> None:
        body = json.dumps({"jsonrpc": "2.0", "method": method, "params": dict(params)}).encode()
        sent = headers if headers is not None else self.headers(method, params)
        if channel in self._kept:
            await self._on(channel, body, sent, -1)
        else:
            await self.send("POST", body, sent, rid=-1)

    async def _on(self, channel: int, body: bytes, headers: Mapping[str, str],
                  rid: int) -> Exchange:
        client, url = self._kept[channel]
        left = self.budget.spend()
        exchange = Exchange()
        try:
            await asyncio.wait_for(self._read(client, "POST", url, body, headers, rid, exchange),
                                   timeout=min(left, self.timeout))
        except (TimeoutError, httpx.HTTPError, OSError) as exc:
            exchange.failure = f"{type(exc).__name__}: {exc}".rstrip(": ")
        return exchange

    async def release(self) -> None:
        kept, self._kept = self._kept, {}
        for client, _ in kept.values():
            await client.aclose()

    async def post(self, body: bytes, headers: Mapping[str, str], *, rid: int = 0,
                   fresh: bool = False, url: str | None = None) -> Exchange:
        return await self.send("POST", body, headers, rid=rid, fresh=fresh, url=url)

    async def send(self, verb: str, body: bytes | None, headers: Mapping[str, str], *,
                   rid: int = 0, fresh: bool = False, url: str | None = None,
                   timeout: float | None = None) -> Exchange:
        """One HTTP exchange; `timeout` (shorter than --timeout) for probes that may hang."""
        left = min(self.budget.spend(), timeout or self.timeout)
        exchange = Exchange()
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = self._client
                if fresh:
                    fresh_client = httpx.AsyncClient(timeout=self.timeout)
                    client = await stack.enter_async_context(fresh_client)
                await asyncio.wait_for(
                    self._read(client, verb, url or self.url, body, headers, rid, exchange),
                    timeout=min(left, self.timeout))
        except (TimeoutError, httpx.HTTPError, OSError) as exc:
            exchange.failure = f"{type(exc).__name__}: {exc}".rstrip(": ")
        return exchange

    async def _read(self, client: httpx.AsyncClient, verb: str, url: str, body: bytes | None,
                    headers: Mapping[str, str], rid: int, exchange: Exchange) -> None:
        async with client.stream(verb, url, content=body, headers=dict(headers)) as response:
            exchange.status = response.status_code
            exchange.headers = {k.lower(): v for k, v in response.headers.items()}
            kind = exchange.headers.get("content-type", "")
            if kind.startswith("text/event-stream"):
                exchange.event_stream = True
                parser = SSEParser()
                chunks = response.aiter_bytes()
                async for chunk in chunks:
                    for event in parser.feed(chunk):
                        self.sort(rid, _decode(event.data), exchange)
                    if exchange.response is not None:
                        break
                # The final response should end the stream: read that end (briefly), so the
                # connection stays reusable, as a client's next round would find it.
                with contextlib.suppress(asyncio.TimeoutError, httpx.HTTPError):
                    await asyncio.wait_for(_drain(chunks), timeout=1.0)
            else:
                raw = await response.aread()
                self.sort(rid, _decode(raw.decode("utf-8", "replace")), exchange)

    async def aclose(self) -> None:
        await self.release()
        await self._client.aclose()


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    async for _ in chunks:
        pass


class StdioProbe(Probe):
    """One child process speaking newline-delimited JSON; `fresh=True` uses a new child."""

    def __init__(self, command: str | Sequence[str], budget: Budget, *,
                 timeout: float = 10.0) -> None:
        super().__init__(budget)
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        self.timeout = timeout
        self._child: asyncio.subprocess.Process | None = None
        self._kept: dict[int, asyncio.subprocess.Process] = {}

    async def _spawn(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, limit=16 * 1024 * 1024)

    async def rpc(self, method: str, params: Mapping[str, Any], *, fresh: bool = False,
                  header_map: Mapping[str, str] | None = None, keep: bool = False) -> Exchange:
        left = self.budget.spend()
        child = await self._spawn() if fresh else await self._shared()
        try:
            exchange = await self._exchange(child, method, params, left)
        finally:
            if fresh and not keep:
                await _stop(child)
        if fresh and keep:
            exchange.channel = self.next_channel()
            self._kept[exchange.channel] = child
        return exchange

    async def rpc_on(self, channel: int | None, method: str, params: Mapping[str, Any], *,
                     header_map: Mapping[str, str] | None = None,
                     headers: Mapping[str, str] | None = None) -> Exchange:
        child = self._kept.get(channel) if channel is not None else None
        if child is None or child.returncode is not None:
            return await self.rpc(method, params)
        exchange = await self._exchange(child, method, params, self.budget.spend())
        exchange.channel = channel
        return exchange

    async def _exchange(self, child: asyncio.subprocess.Process, method: str,
                        params: Mapping[str, Any], left: float) -> Exchange:
        rid = self.next_id()
        exchange = Exchange()
        try:
            line = json.dumps(_message(rid, method, params)).encode() + b"\n"
            await asyncio.wait_for(self._talk(child, line, rid, exchange),
                                   timeout=min(left, self.timeout))
        except (TimeoutError, OSError, ValueError) as exc:
            exchange.failure = f"{type(exc).__name__}: {exc}".rstrip(": ")
        return exchange

    async def notify_on(self, channel: int | None, method: str, params: Mapping[str, Any],
                        headers: Mapping[str, str] | None = None) -> None:
        child = self._kept.get(channel) if channel is not None else await self._shared()
        if child is None or child.stdin is None:
            return
        message = {"jsonrpc": "2.0", "method": method, "params": dict(params)}
        with contextlib.suppress(OSError):
            child.stdin.write(json.dumps(message).encode() + b"\n")
            await child.stdin.drain()

    async def release(self) -> None:
        kept, self._kept = self._kept, {}
        for child in kept.values():
            await _stop(child)

    async def _shared(self) -> asyncio.subprocess.Process:
        if self._child is None or self._child.returncode is not None:
            self._child = await self._spawn()
        return self._child

    async def _talk(self, child: asyncio.subprocess.Process, line: bytes, rid: int,
                    exchange: Exchange) -> None:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(line)
        await child.stdin.drain()
        while exchange.response is None:
            raw = await child.stdout.readline()
            if not raw:
                exchange.failure = "the server process closed its output"
                return
            self.sort(rid, _decode(raw.decode("utf-8", "replace")), exchange)

    async def aclose(self) -> None:
        await self.release()
        if self._child is not None:
            await _stop(self._child)
            self._child = None


async def _stop(child: asyncio.subprocess.Process) -> None:
    if child.returncode is None:
        if child.stdin is not None:
            child.stdin.close()
        try:
            await asyncio.wait_for(child.wait(), timeout=2)
        except TimeoutError:
            child.kill()
            await child.wait()
