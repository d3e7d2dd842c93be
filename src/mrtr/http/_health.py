"""Health probes: `GET /healthz` (the process answers) and `GET /readyz` (it can serve flows)."""

# Design: probes sit outside the MCP endpoint and before the Host/Origin check: a Kubernetes
# kubelet or a load balancer sends its own Host (a pod IP). They reveal nothing but "ok" or the
# name of the failing check; the reason goes to the log. Readiness means the requestState keys
# seal and open a token, and the store (when there is one) answers a read within `timeout`.
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

import msgspec

from mrtr.server import Binding, Dispatcher
from mrtr.server._failures import probe_method, unready

__all__ = ["PROBE_PATHS", "Health"]

PROBE_PATHS = frozenset({"/healthz", "/readyz"})
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_BINDING = Binding(method="readyz", target="readyz", arguments_digest=b"\0" * 32, principal=None)
_READY_KEY = "mrtr:readyz"  # read, never written: any answer (even "absent") means reachable


class Health:
    """Answers the probe paths for one Dispatcher; `timeout` bounds the store check (seconds)."""

    def __init__(self, dispatcher: Callable[[], Dispatcher], *, timeout: float = 2.0) -> None:
        self._dispatcher = dispatcher  # the app's current one (serve may swap it)
        self.timeout = timeout
        self.log = logging.getLogger("mrtr.transports.health")

    async def answer(self, path: str, method: str, send: Send) -> None:
        """Write the probe's reply: 200 or 503 with a small JSON body; 405 for non-GET/HEAD."""
        if method not in ("GET", "HEAD"):
            refusal = probe_method()
            await _respond(send, refusal.status, refusal.body, method, refusal.headers)
            return
        if path == "/healthz":
            await _respond(send, 200, msgspec.json.encode({"status": "ok"}), method)
            return
        checks = {"keys": self._keys(), "store": await self._store()}
        if not all(value in ("ok", "none") for value in checks.values()):
            refusal = unready(checks)
            await _respond(send, refusal.status, refusal.body, method, refusal.headers)
            return
        await _respond(send, 200, msgspec.json.encode({"status": "ok", "checks": checks}), method)

    def _keys(self) -> str:
        sealer = self._dispatcher().sealer
        try:
            sealer.unseal(sealer.seal(b"", _BINDING), _BINDING)
        except Exception as exc:  # any failure means not ready; the reason is logged
            self.log.error("readyz: requestState keys do not seal: %r", exc)
            return "failing"
        return "ok"

    async def _store(self) -> str:
        store = self._dispatcher().store
        if store is None:
            return "none"
        try:
            await asyncio.wait_for(store.get(_READY_KEY), self.timeout)
        except Exception as exc:  # StoreUnavailable, a timeout, a closed connection
            self.log.error("readyz: store unreachable: %r", exc)
            return "unreachable"
        return "ok"


async def _respond(send: Send, status: int, body: bytes, method: str,
                   extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store"),
               (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
