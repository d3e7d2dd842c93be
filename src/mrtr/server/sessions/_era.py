"""A session's request in its 2026-07-28 form, and a 2026-07-28 reply in its 2025 form."""

# Design: the Dispatcher serves one era. A session's request is rewritten into the 2026 form
# with the `_meta` of its session: what `initialize` negotiated (client capabilities and info)
# and the level of `logging/setLevel` are the session's, so the request's own `_meta` cannot
# set them (its other keys, a progress token or trace context, pass). The reply loses the 2026
# envelope on the way back.
from __future__ import annotations

import msgspec

from mrtr.protocol import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    LOG_LEVEL_KEY,
    SERVER_INFO_KEY,
    JSONObject,
    encode,
)
from mrtr.server._dispatch import Reply
from mrtr.server._failures import legacy_error
from mrtr.server.sessions._session import Session

__all__ = ["legacy_reply", "modern", "result_body"]

_ENVELOPE_KEYS = ("resultType", "ttlMs", "cacheScope")
_SESSION_META = (CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY)


def modern(session: Session, message: JSONObject, params: JSONObject) -> JSONObject:
    """The 2026-07-28 form of a session's request: the session supplies `_meta`."""
    meta = params.get("_meta")
    own = {k: v for k, v in meta.items() if k not in _SESSION_META} if isinstance(meta, dict) \
        else {}
    own.update(session.meta)
    return {**message, "params": {**params, "_meta": own}}


def result_body(request_id: object, result: object) -> bytes:
    return encode({"jsonrpc": "2.0", "id": request_id, "result": result})


def legacy_reply(method: str, reply: Reply) -> bytes:
    """The 2025 form of a reply: no 2026 envelope; errors in their 2025 codes or shapes."""
    reply = legacy_error(method, reply)
    if reply.error is not None:
        return reply.body
    result = msgspec.to_builtins(reply.result)
    for key in _ENVELOPE_KEYS:
        result.pop(key, None)
    meta = result.get("_meta")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k != SERVER_INFO_KEY}
        if meta:
            result["_meta"] = meta
        else:
            del result["_meta"]
    return result_body(reply.request_id, result)
