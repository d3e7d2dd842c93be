"""HostCheck: the Host and Origin allow-lists that stop DNS rebinding (spec: streamable-http).

An allowed name without a port matches that name on any port; `name:port` matches exactly.
"""

# Design: DNS rebinding is defeated by the host *name* (an attacker's page sends its own domain),
# so the loopback names are accepted on any port: a reverse proxy on another port keeps working.
# Each distinct Host value is judged once and remembered (bounded), both as sent and normalised
# (stripped, lower-cased: a normalised value is its own normalisation), so a request costs one
# dict lookup; the refusal text is built only on the refusal path.
from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

__all__ = ["LOOPBACK", "HostCheck", "bound_resource"]

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_WILDCARD = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]"}  # bind addresses -> what to connect to
_REMEMBERED = 64  # distinct Host values judged once; a client sending junk cannot grow this


class HostCheck:
    """Judges `Host` and `Origin` headers; `allowed_hosts=None` means the loopback names."""

    __slots__ = ("exact", "names", "origins", "seen")

    def __init__(
        self, allowed_hosts: Sequence[str] | None = None, allowed_origins: Sequence[str] = ()
    ) -> None:
        given = LOOPBACK if allowed_hosts is None else allowed_hosts
        entries = [h.strip().lower() for h in given]
        self.names = {e for e in entries if not split_host(e)[1]}
        self.exact = {e for e in entries if split_host(e)[1]}
        self.origins = {o.lower().rstrip("/") for o in allowed_origins}
        self.seen: dict[str, bool] = {}

    def refusal(self, headers: Mapping[str, str]) -> str | None:
        """None when the request may proceed, else the 403 message saying what to configure."""
        raw = headers.get("host", "")
        if self.seen.get(raw) is not True:  # judged, remembered under the raw value too
            host = raw.strip().lower()
            if not self.allowed(host):
                return _advice("Host", host, *split_host(host))
            if len(self.seen) < _REMEMBERED:
                self.seen[raw] = True
        origin = headers.get("origin")
        if origin is None:
            return None
        origin = origin.strip().lower().rstrip("/")
        scheme, sep, rest = origin.partition("://")
        if origin in self.origins or (
            sep and scheme in ("http", "https") and self.allowed(rest)
        ):
            return None
        web = sep and scheme in ("http", "https")
        return _advice("Origin", origin, *(split_host(rest) if web else ("", "")))

    def allowed(self, host: str) -> bool:
        """Whether `host` (`name[:port]`, lower-cased) is on the allow-list."""
        known = self.seen.get(host)
        if known is not None:
            return known
        verdict = self._judge(host)
        if len(self.seen) < _REMEMBERED:
            self.seen[host] = verdict
        return verdict

    def _judge(self, host: str) -> bool:
        if not host:
            return False
        if host in self.exact:
            return True
        name, port = split_host(host)
        return name in self.names and (port == "" or port.isdigit())


def bound_resource(scope: MutableMapping[str, Any], path: str) -> str:
    """`http://` + the address the ASGI server is bound to + `path`: McpApp's resource URL when
    its guard is given none.

    `scope["server"]` is the listening socket's address (uvicorn, Hypercorn, httpx's
    ASGITransport set it), never a header the client chose; the scheme is always http, as
    forwarded-proto headers can be the client's too. A public URL (a proxy, TLS) must be
    configured: AuthSettings(resource=...).
    """
    server = scope.get("server")
    host, port = server if server else ("localhost", None)
    if not isinstance(host, str) or not host or host.startswith("/"):  # none, or a Unix socket
        host, port = "localhost", None
    name = f"[{host}]" if ":" in host else host
    at = f":{port}" if isinstance(port, int) and port != 80 else ""
    return f"http://{name}{at}{path}"


def split_host(host: str) -> tuple[str, str]:
    """`name[:port]` -> (name, port); IPv6 names keep their brackets."""
    if host.startswith("["):
        name, _, rest = host.partition("]")
        return name + "]", rest.removeprefix(":")
    name, _, port = host.partition(":")
    return name, port


def _advice(header: str, value: str, name: str, port: str) -> str:
    shown = value if len(value) <= 100 else value[:100] + "..."
    if not name or len(name) > 100 or not name.isprintable() or " " in name:
        return f"Forbidden: {header} {shown!r} not allowed"
    if name in _WILDCARD:
        # Design: the wildcard bind address is never a legitimate host name, so it is not
        # accepted by default and the advice is to connect to a real name instead.
        at = f":{port}" if port.isdigit() else ""
        return (f"Forbidden: {header} {shown!r} not allowed; {name} is the wildcard bind "
                f"address, not a host name: connect to {_WILDCARD[name]}{at} or localhost{at}, "
                f"or to a name given to mrtr serve with --allow-host NAME (McpApp: allowed_hosts)")
    return (f"Forbidden: {header} {shown!r} not allowed; start mrtr serve with "
            f"--allow-host {name} (McpApp: allowed_hosts)")
