"""In-process testing for mrtr servers: drive MRTR rounds with scripted answers, no sockets.

`TestClient(app)` encodes every request to bytes and decodes every reply, so tests exercise the
real wire path. Answers are scripted per ask key; helpers tamper with, expire, replay and re-key
request states.
"""

# Design: the client is synchronous (its own asyncio.Runner) so plain pytest functions can use it.
# It deliberately reuses nothing from mrtr.client: a test client must not share the bugs of the
# client it might be used to test.
from __future__ import annotations

import asyncio
import base64
import itertools
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import msgspec

from mrtr.errors import from_wire
from mrtr.protocol import PROTOCOL_VERSION
from mrtr.server import Dispatcher, Peer, Sealer, Server
from mrtr.stores import Store

__all__ = [
    "ALL_CAPABILITIES",
    "ANSWER_CANCEL",
    "ANSWER_DECLINE",
    "Clock",
    "flip_bit",
    "Flow",
    "TestClient",
    "then",
]

ALL_CAPABILITIES: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}},
    "roots": {},
}
ANSWER_DECLINE: dict[str, Any] = {"action": "decline"}
ANSWER_CANCEL: dict[str, Any] = {"action": "cancel"}

Answer = Any  # dict content, bool (confirm), a full response dict with "action", or a callable


class then(tuple[Any, ...]):  # noqa: N801 - reads as a verb in scripts
    """Successive answers to the same ask key: `answers={"details": then(bad, good)}`."""

    def __new__(cls, *answers: Any) -> then:
        return super().__new__(cls, answers)


class Clock:
    """A settable clock for sealing tests: `clock.advance(seconds)` expires states."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Flow:
    """What one driven call went through: every round's raw reply and the final one, and the
    notifications the server sent meanwhile (`logs`, `progress`)."""

    replies: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    notifications: list[dict[str, Any]] = field(default_factory=list)

    @property
    def logs(self) -> list[dict[str, Any]]:
        """The params of each `notifications/message` (`ctx.info(...)`, `ctx.log(...)`), in
        order: `{"level": "info", "data": "...", "logger": ...}`."""
        return self._params("notifications/message")

    @property
    def progress(self) -> list[dict[str, Any]]:
        """The params of each `notifications/progress` (`ctx.report_progress(...)`), in order:
        `{"progressToken": ..., "progress": 1.0, "total": 3.0, "message": "..."}`."""
        return self._params("notifications/progress")

    def _params(self, method: str) -> list[dict[str, Any]]:
        return [n.get("params", {}) for n in self.notifications if n.get("method") == method]

    @property
    def result(self) -> dict[str, Any]:
        """The final result object (raises the wire error if the call ended in one)."""
        last = self.replies[-1]
        if "error" in last:
            raise from_wire(last["error"])
        return last["result"]  # type: ignore[no-any-return]

    @property
    def consent_token(self) -> str | None:
        """The `_confirm` token of a final result that asks the model to confirm, else None
        (docs/consent.md): call the tool again with `{**arguments, "_confirm": token}`."""
        consent = self.result.get("_meta", {}).get("io.github.mrtr/consent")
        return consent.get("token") if isinstance(consent, dict) else None

    @property
    def rounds(self) -> int:
        return len(self.replies)

    @property
    def text(self) -> str:
        """The concatenated text content of the final tool result."""
        return "".join(c.get("text", "") for c in self.result.get("content", []))

    def asked(self, round_no: int) -> dict[str, Any]:
        """The inputRequests of round `round_no` (1-based; {} for a final result).

        Raises the wire error when that round ended in one, AssertionError past the last round.
        """
        if not 1 <= round_no <= len(self.replies):
            raise AssertionError(f"no round {round_no}: the flow had {len(self.replies)} "
                                 f"round{'s' if len(self.replies) != 1 else ''}")
        reply = self.replies[round_no - 1]
        if "error" in reply:
            raise from_wire(reply["error"])
        return reply["result"].get("inputRequests", {})  # type: ignore[no-any-return]


class TestClient:
    """Drive an mrtr Server in process: `TestClient(app).call_tool(name, args, answers={...})`.

    Declares EVERY client capability (ALL_CAPABILITIES) unless `capabilities=` is given, unlike
    a real Client, which declares only what it can answer: pass `capabilities={}` (or a part)
    to test how the server treats a client that cannot answer. A handler that returns with an
    ask it never awaited (a missing `await`) fails the request with AssertionError, where a
    real server only logs a warning. Driven calls (`call_tool`, `get_prompt`, `read_resource`)
    ask for log messages at `log_level` (None: none) and progress, and record both in their
    Flow; raw `send` and `request` add neither to `_meta`.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        app: Server,
        *,
        sealer: Sealer | None = None,
        clock: Clock | None = None,
        principal: str | None = None,
        capabilities: Mapping[str, Any] | None = None,
        max_rounds: int = 16,
        store: Store | None = None,
        log_level: str | None = "debug",
    ) -> None:
        self.clock = clock or Clock()
        self.sealer = sealer or Sealer(
            keys=[b"k" * 32], audience=app.name, clock=self.clock
        )
        self._unawaited: list[str] = []  # asks a handler made and never awaited: fail the test
        self.dispatcher = Dispatcher(app, sealer=self.sealer, max_rounds=max_rounds, store=store,
                                     on_unawaited_ask=self._unawaited.append)
        self.principal = principal
        self.capabilities = dict(ALL_CAPABILITIES if capabilities is None else capabilities)
        self.log_level = log_level
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self._runner = asyncio.Runner()
        self.notifications: list[dict[str, Any]] = []

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, tp: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._runner.close()

    # -- one request ---------------------------------------------------------------------------
    def meta(self, **extra: Any) -> dict[str, Any]:
        meta = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "mrtr-testclient", "version": "0"},
        }
        meta.update(extra)
        return meta

    def send(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Send one raw request (params get `_meta` unless they carry one) and return the reply."""
        body = dict(params or {})
        body.setdefault("_meta", self.meta())
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": body}
        return self.send_raw(msgspec.json.encode(message))

    def send_raw(self, data: bytes) -> dict[str, Any]:
        """Send raw bytes through the dispatcher; the decoded JSON-RPC reply ({} if none)."""

        async def sink(notification: msgspec.Struct) -> None:
            self.notifications.append(msgspec.to_builtins(notification))

        peer = Peer(principal=self.principal, transport="memory")
        reply = self._runner.run(self.dispatcher.handle_bytes(data, peer, sink=sink))
        if self._unawaited:
            found, self._unawaited[:] = "; ".join(self._unawaited), []
            raise AssertionError(found)
        if reply is None:
            return {}
        return msgspec.json.decode(reply.body)  # type: ignore[no-any-return]

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return its result; wire errors raise their mrtr.errors class."""
        reply = self.send(method, params)
        if "error" in reply:
            raise from_wire(reply["error"])
        return reply["result"]  # type: ignore[no-any-return]

    def complete_url(self, url: str) -> None:
        """What a browser does at the end of a URL elicitation (`ctx.elicit_url_done`): open
        `<path>/elicitation/complete/<id>?...` (any URL whose last path segment is the id);
        the query parameters are the recorded data. Raises UnknownElicitation for an id that
        does not open."""
        parts = urllib.parse.urlsplit(url)
        elicitation_id = parts.path.rsplit("/", 1)[-1]
        data = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        self._runner.run(self.dispatcher.completions.complete(elicitation_id, data))

    # -- driven flows --------------------------------------------------------------------------
    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        answers: Mapping[str, Answer] | None = None,
        max_rounds: int = 10,
    ) -> Flow:
        return self.drive("tools/call", {"name": name, "arguments": dict(arguments or {})},
                          answers, max_rounds)

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        answers: Mapping[str, Answer] | None = None,
    ) -> Flow:
        return self.drive("prompts/get", {"name": name, "arguments": dict(arguments or {})},
                          answers, 10)

    def read_resource(
        self, uri: str, *, answers: Mapping[str, Answer] | None = None
    ) -> Flow:
        return self.drive("resources/read", {"uri": uri}, answers, 10)

    def drive(
        self,
        method: str,
        params: Mapping[str, Any],
        answers: Mapping[str, Answer] | None,
        max_rounds: int,
    ) -> Flow:
        """Send `method` and answer every round from `answers` until a final reply."""
        script = {k: list(v) if isinstance(v, then) else [v] for k, v in (answers or {}).items()}
        flow = Flow()
        extra: dict[str, Any] = {}
        for _ in range(max_rounds):
            body = {**params, **extra}
            flow.requests.append(body)
            seen = len(self.notifications)
            reply = self.send(method, {"_meta": self._listening_meta(), **body})
            flow.notifications.extend(self.notifications[seen:])
            flow.replies.append(reply)
            result = reply.get("result")
            if result is None or result.get("resultType") != "input_required":
                return flow
            responses = {
                key: _respond(key, request, script)
                for key, request in result.get("inputRequests", {}).items()
            }
            extra = {"inputResponses": responses}
            if "requestState" in result:
                extra["requestState"] = result["requestState"]
        raise AssertionError(f"no final reply after {max_rounds} rounds")

    def _listening_meta(self) -> dict[str, Any]:
        """`_meta` of a driven round: a fresh progress token, and the log level if any."""
        extra: dict[str, Any] = {"progressToken": f"progress-{next(self._tokens)}"}
        if self.log_level is not None:
            extra["io.modelcontextprotocol/logLevel"] = self.log_level
        return self.meta(**extra)


def _respond(key: str, request: dict[str, Any], script: dict[str, list[Answer]]) -> Any:
    queue = script.get(key)
    if not queue:
        raise AssertionError(f"no scripted answer for input request {key!r}: {request}")
    answer = queue.pop(0) if len(queue) > 1 else queue[0]
    if callable(answer):
        answer = answer(request)
    method = request.get("method")
    if method == "elicitation/create":
        if isinstance(answer, bool):
            return {"action": "accept", "content": {"confirm": answer}}
        if isinstance(answer, dict) and "action" in answer:
            return answer
        if request["params"].get("mode") == "url":
            return {"action": "accept"}
        return {"action": "accept", "content": answer}
    if method == "sampling/createMessage" and isinstance(answer, str):
        return {"role": "assistant", "content": {"type": "text", "text": answer},
                "model": "scripted", "stopReason": "endTurn"}
    if method == "roots/list" and isinstance(answer, list):
        return {"roots": [r if isinstance(r, dict) else {"uri": str(r)} for r in answer]}
    return answer


def flip_bit(state: str, bit: int = 0) -> str:
    """Return `state` with one bit of its sealed bytes flipped (still well-formed base64url)."""
    prefix, _, payload = state.partition(".")
    raw = bytearray(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    raw[(bit // 8) % len(raw)] ^= 1 << (bit % 8)
    return prefix + "." + base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
