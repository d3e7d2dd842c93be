"""SessionServer: serves `initialize` clients (2025-11-25 and earlier) with the same handlers.

Each request of a session is rewritten into its 2026-07-28 form (the session supplies `_meta`),
served by the Dispatcher, and when that answers `input_required` this class plays the MRTR client:
each input request goes to the client as a server→client request, and the answers come back in a
retry with `inputResponses` and `requestState` until the result is final.
"""

# Design: one code path for handlers. The round engine replays the handler from its journal on
# every retry, so `ctx.once` runs once and a re-ask carries its feedback exactly as over MRTR.
# Results lose the 2026 envelope (`resultType`, `ttlMs`, `cacheScope`, serverInfo `_meta`) in
# `_era`; `ping`, `logging/setLevel` and `resources/(un)subscribe` answer exactly `{}`. Transports
# own the I/O: they give each request an Outbound (its POST's SSE stream, or stdout) and pass
# client responses back through `serve`, which resolves the waiting server request by id, passes
# an answer to a request another process issued to the store, and drops any other at once.
from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
from collections.abc import Callable
from typing import Any

import msgspec

from mrtr.errors import (
    InvalidParams,
    InvalidRequest,
    LimitExceeded,
    MethodNotFound,
    ProtocolError,
)
from mrtr.protocol import (
    LEGACY_VERSIONS,
    METHODS,
    PROTOCOL_VERSION_KEY,
    UNSET,
    ElicitationCompleteNotification,
    ElicitationCompleteNotificationParams,
    Implementation,
    InitializeResult,
    InputRequest,
    InputRequiredResult,
    JSONObject,
    RequestId,
    encode,
    encode_message,
    negotiate_version,
)
from mrtr.server._completions import not_yet
from mrtr.server._dispatch import Dispatcher, Reply
from mrtr.server._failures import ask_failed, error_reply, too_many_rounds
from mrtr.server._peer import Peer
from mrtr.server.sessions._answers import AnswerChannel
from mrtr.server.sessions._era import legacy_reply, modern, result_body
from mrtr.server.sessions._local import local_methods
from mrtr.server.sessions._session import Outbound, Session, SessionInfo
from mrtr.server.sessions._table import SessionLimits, Sessions

__all__ = ["SessionServer"]

# Methods whose handlers may ask: HTTP answers them on an SSE stream.
STREAMED = frozenset(m for m, spec in METHODS.items() if spec.may_input_required)


class _AskFailed(Exception):  # noqa: N818 - control flow: the call ends with this text
    """A server→client request got no usable answer; `text` explains it to the model."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class SessionServer:
    """Serves the requests of `initialize` sessions through one Dispatcher (for the transports).

    `ask_timeout` is how many seconds a server→client request may wait for its answer;
    `session_ttl` bounds the life of a session id (seconds); `limits` caps the sessions this
    process holds (SessionLimits). Terminations go to the Dispatcher's store, for every process.
    Playing the MRTR client for the session, it answers at most `max_rounds` input_required
    replies of one call, as mrtr's own Client does (10), or fewer when the Dispatcher's
    `max_rounds` is lower.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        ask_timeout: float = 600.0,
        session_ttl: float = 24 * 3600.0,
        limits: SessionLimits | None = None,
        max_rounds: int = 10,
        logger: logging.Logger | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.ask_timeout = ask_timeout
        self.max_rounds = min(max_rounds, dispatcher.max_rounds)
        self.log = logger or logging.getLogger("mrtr.server.session")
        name = dispatcher.server.name
        sealer = dispatcher.sealer.for_audience(f"{name} mcp-session", ttl=session_ttl)
        self.sessions = Sessions(sealer, ttl=session_ttl, limits=limits, store=dispatcher.store,
                                 logger=self.log)
        self.answers = AnswerChannel(dispatcher.store, ttl=ask_timeout, logger=self.log,
                                     limits=dispatcher.limits)
        self._local = local_methods(dispatcher.server)

    # -- handshake ---------------------------------------------------------------------------------
    def initialize(self, message: JSONObject, peer: Peer, *,
                   address: str | None = None) -> tuple[Session | None, bytes]:
        """Open a session for an `initialize` request: (the session or None, the reply body).

        `address` is the client's network address (an anonymous session counts against it).
        Raises TooManySessions when a cap of the table refuses the session.
        """
        request_id = message.get("id")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            error = InvalidParams("Invalid params: initialize needs a protocolVersion string",
                                  data={"supported": list(LEGACY_VERSIONS),
                                        "requested": requested})
            return None, error_reply(_id(request_id), error).body
        capabilities = params.get("capabilities")
        client_info = params.get("clientInfo")
        info = SessionInfo(
            version=negotiate_version(requested),
            capabilities=capabilities if isinstance(capabilities, dict) else {},
            client_info=client_info if isinstance(client_info, dict) else None,
        )
        started = self.dispatcher.request_log.start()
        session = self.sessions.open(info, peer.principal, address=address)
        result = self._initialize_result(info.version)
        self.dispatcher.request_log.answered(started, request_id, "initialize", peer, result)
        return session, result_body(request_id, result)

    def _initialize_result(self, version: str) -> InitializeResult:
        server = self.dispatcher.server
        capabilities = self.dispatcher.capabilities()
        resources = capabilities.resources
        capabilities = msgspec.structs.replace(
            capabilities,
            logging={},
            resources={"subscribe": True} if resources is not UNSET else UNSET,
        )
        return InitializeResult(
            protocol_version=version,
            capabilities=capabilities,
            server_info=Implementation(name=server.name, version=server.version),
            instructions=server.instructions if server.instructions is not None else UNSET,
        )

    # -- one message of a session ------------------------------------------------------------------
    async def serve(
        self, session: Session, message: JSONObject, peer: Peer, outbound: Outbound
    ) -> bytes | None:
        """Serve one decoded message of `session`; the reply body for a request, else None.

        Notifications, responses to server requests and requests the client cancelled
        (`notifications/cancelled`) return None.
        """
        method = message.get("method")
        if not isinstance(method, str):
            await self._response(session, message, peer.principal)
            return None
        if "id" not in message:
            self._notification(session, method, message.get("params"))
            return None
        request_id = _id(message.get("id"))
        if request_id is None:
            return error_reply(None, InvalidRequest("Invalid Request: bad id")).body
        # Its own task, so `notifications/cancelled` stops the handler and the request ends
        # without a reply, while the transport's task (and stream) carries on.
        task = asyncio.ensure_future(
            self._request(session, request_id, method, message, peer, outbound))
        session.inflight[request_id] = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and current is not None and not current.cancelling():
                self.log.info("request %r cancelled by the client", request_id)
                return None
            raise
        finally:
            session.inflight.pop(request_id, None)
            self.sessions.touch(session)

    async def _response(self, session: Session, message: JSONObject,
                        principal: str | None) -> None:
        """A client's response to a server request: to the request awaiting it here, else to
        the store when another process issued it, else dropped (never stored)."""
        if session.resolve(message):
            return
        request_id = message.get("id")
        origin = session.origin(request_id)
        if origin == "elsewhere":
            await self.answers.pass_on(session.id, message, principal)
        elif origin == "here":
            self.log.info("a response to server request %r came after its ask ended: dropped",
                          request_id)
        else:
            session.strays += 1
            if session.strays == 1:
                self.log.warning(
                    "dropped a response to server request id %s, which this session never "
                    "issued (or whose ask is over); further ones in this session are dropped "
                    "without a log line", _shown(request_id))

    def _notification(self, session: Session, method: str, params: object) -> None:
        if method == "notifications/initialized":
            session.initialized = True
        elif method == "notifications/cancelled" and isinstance(params, dict):
            session.cancel(params.get("requestId"))

    async def _request(
        self,
        session: Session,
        request_id: RequestId,
        method: str,
        message: JSONObject,
        peer: Peer,
        outbound: Outbound,
    ) -> bytes:
        params = message.get("params", {})
        if not isinstance(params, dict):
            return error_reply(request_id, InvalidParams("Invalid params: not an object")).body
        if method in self._local or method == "initialize" or method not in METHODS:
            return self._answer_here(session, request_id, method, params, peer)
        meta = params.get("_meta")
        if isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta:
            # 2026-07-28 `_meta` inside a session: served statelessly, exactly as without one.
            reply = await self.dispatcher.handle_bytes(encode(message), peer, sink=_sink(outbound))
            return reply.body if reply is not None else b""
        reply = await self._rounds(session, modern(session, message, params), peer, outbound)
        return legacy_reply(method, reply)

    def _answer_here(self, session: Session, request_id: RequestId, method: str,
                     params: JSONObject, peer: Peer) -> bytes:
        """A request the session answers itself (`ping`, `logging/setLevel`, …), logged as
        the Dispatcher logs the others (the `mrtr.requests` line)."""
        started = self.dispatcher.request_log.start()
        result: object = None
        error: ProtocolError | None = MethodNotFound(f"Method not found: {method}")
        local = self._local.get(method)
        try:
            if local is not None or method == "initialize":
                error = None
                result = (local(session, params) if local is not None
                          else self._initialize_result(session.info.version))
        except ProtocolError as exc:
            error = exc
        self.dispatcher.request_log.answered(started, request_id, method, peer, result, error)
        return (result_body(request_id, result) if error is None
                else error_reply(request_id, error).body)

    def as_request(self, session: Session, message: JSONObject) -> Any | None:
        """`message` decoded as the 2026-07-28 request it is served as; None if it is none."""
        params = message.get("params", {})
        if not isinstance(params, dict):
            return None
        try:
            return self.dispatcher.receive(encode(modern(session, message, params)))
        except ProtocolError:
            return None

    async def _rounds(
        self, session: Session, request: JSONObject, peer: Peer, outbound: Outbound
    ) -> Reply:
        """Serve `request`, fulfilling each `input_required` with server→client requests."""
        dispatcher = self.dispatcher
        sink = _sink(outbound)
        urls: list[str] = []
        waited = 0.0
        peer = dataclasses.replace(peer, session_id=session.id)  # for telemetry
        for answered in range(self.max_rounds + 1):
            try:
                decoded = dispatcher.receive(encode(request))
            except ProtocolError as exc:
                return error_reply(exc.request_id, exc)
            reply = await dispatcher.handle(decoded, peer, sink)
            result = reply.result
            while (isinstance(result, InputRequiredResult) and waited < self.ask_timeout
                   and (wait := not_yet(result)) is not None):
                # A URL elicitation not completed yet: the 2025 client waits on this request,
                # so this waits (the hint apart) and retries; these rounds do not count.
                await asyncio.sleep(wait)
                waited += wait
                request = _retried(request, {}, result)
                reply = await dispatcher.handle(dispatcher.receive(encode(request)), peer, sink)
                result = reply.result
            if not isinstance(result, InputRequiredResult):
                await self._complete_urls(session, urls, outbound)
                return reply
            if answered == self.max_rounds:
                break
            try:
                answers = await self._fulfil(session, result, outbound, urls, peer.principal)
            except _AskFailed as exc:
                return ask_failed(request.get("id"), request.get("method"), exc.text, self.log)
            except LimitExceeded as exc:  # an answer over StoreLimits.max_answer
                return error_reply(request.get("id"), exc)
            request = _retried(request, answers, result)
        return too_many_rounds(request.get("id"), request.get("method"), self.max_rounds,
                               self.log)

    async def _fulfil(
        self, session: Session, result: InputRequiredResult, outbound: Outbound, urls: list[str],
        principal: str | None,
    ) -> JSONObject:
        asks = result.input_requests if result.input_requests is not UNSET else {}
        keys = list(asks)
        tasks = [asyncio.ensure_future(self._ask(session, asks[key], outbound, urls, principal))
                 for key in keys]
        try:
            answers = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:  # one ask failed: the others are moot, stop waiting for them
                task.cancel()
            raise
        return dict(zip(keys, answers, strict=True))

    async def _ask(
        self, session: Session, ask: InputRequest, outbound: Outbound, urls: list[str],
        principal: str | None,
    ) -> JSONObject:
        method = ask.method
        params = msgspec.to_builtins(ask.params) if ask.params is not UNSET else {}
        if method == "elicitation/create":
            if params.get("mode") == "url":
                params["elicitationId"] = secrets.token_urlsafe(16)
                urls.append(params["elicitationId"])
            elif session.version != "2025-11-25":
                params.pop("mode", None)  # form is the only mode before 2025-11-25
        elsewhere = self.answers.elsewhere(session.id, principal)
        try:
            response = await session.request(method, params, outbound, self.ask_timeout,
                                             elsewhere=elsewhere)
        except TimeoutError:
            raise _AskFailed(
                f"The client did not answer the {method} request within "
                f"{self.ask_timeout:g} seconds."
            ) from None
        self.answers.check(method, response)  # LimitExceeded: over StoreLimits.max_answer
        answer = response.get("result")
        if isinstance(answer, dict):
            return answer
        if method == "elicitation/create":
            return {"action": "cancel"}  # an error is no answer: the user did not accept
        error = response.get("error")
        reason = error.get("message") if isinstance(error, dict) else None
        raise _AskFailed(f"The client refused the {method} request: {reason or 'no reason'}.")

    async def _complete_urls(self, session: Session, urls: list[str], outbound: Outbound) -> None:
        if session.version != "2025-11-25":
            return
        for elicitation_id in urls:
            done = ElicitationCompleteNotificationParams(elicitation_id=elicitation_id)
            await outbound(encode_message(ElicitationCompleteNotification(params=done)))

    # -- local methods -----------------------------------------------------------------------------
    async def resource_updated(self, uri: str) -> None:
        """Send `notifications/resources/updated` to each session subscribed to `uri` that
        has a GET stream open (it is lost otherwise, as the 2025 transport allows)."""
        body = encode({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                       "params": {"uri": uri}})
        for session in self.sessions.live():
            if uri in session.subscriptions and session.streams:
                await session.streams[0](body)


def _retried(request: JSONObject, answers: JSONObject, result: InputRequiredResult) -> JSONObject:
    params = {**request["params"], "inputResponses": answers}
    if result.request_state is not UNSET:
        params["requestState"] = result.request_state
    return {**request, "params": params}


def _id(value: object) -> RequestId | None:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _shown(request_id: object) -> str:
    """A client-chosen id as logged: at most 80 characters of it."""
    text = repr(request_id)
    return text if len(text) <= 80 else text[:77] + "..."


def _sink(outbound: Outbound) -> Callable[[msgspec.Struct], Any]:
    async def sink(notification: msgspec.Struct) -> None:
        await outbound(encode_message(notification))

    return sink
