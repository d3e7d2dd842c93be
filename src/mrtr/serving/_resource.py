"""Who `mrtr serve` is: the resource URL tokens must name, and the proxies it believes.

The resource URL (RFC 9728: the audience a token must name and what the protected-resource
metadata publishes) is `--auth-resource`, else derived once from what the server was told: http,
the bind address and port, and `--path`. It is never read from a request's Host or X-Forwarded-*
headers, which any client writes. Forwarded headers are believed only from the proxies named
with `--forwarded-allow-ips` (uvicorn itself believes 127.0.0.1 by default).
"""

# Design: a public bind without --auth-resource is refused rather than derived: clients reach a
# public server through a name (and usually TLS) the bind address does not tell, and a derived
# URL would either refuse every honest token or, were it taken from the request, accept tokens
# minted for any other server. With --port 0 the port is known only once bound; the McpApp then
# derives the same URL from the socket it serves (mrtr.http._hosts.bound_resource).
from __future__ import annotations

import dataclasses
import ipaddress
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mrtr.protocol._loopback import is_loopback

if TYPE_CHECKING:
    from mrtr.auth import AuthSettings

__all__ = ["check_forwarded", "resource_settings", "warn_unset_resource"]

log = logging.getLogger("mrtr.serve")


def resource_settings(auth: AuthSettings, host: str, port: int, path: str) -> AuthSettings:
    """`auth` naming its resource URL: the configured one, else `http://host:port/path`.

    Raises ValueError, naming the flag to add, for a non-loopback `host` without a resource.
    """
    if auth.resource is not None:
        return auth
    if not is_loopback(host):
        raise ValueError(
            f"--auth-issuer on a non-loopback bind (--host {host or '0.0.0.0'}) needs "
            f"--auth-resource URL (or MRTR_AUTH_RESOURCE): the public URL clients reach the "
            f"MCP endpoint at, e.g. --auth-resource https://mcp.example.com{path}; the audience "
            "a token must name is never taken from a request's Host or X-Forwarded-* headers")
    if port == 0:
        return auth  # known once bound: the McpApp derives it from the socket it serves
    bare = host.strip("[]").lower()
    resource = f"http://{f'[{bare}]' if ':' in bare else bare}:{port}{path}"
    log.info("accepting access tokens for %s (the resource URL; --auth-resource sets another)",
             resource)
    return dataclasses.replace(auth, resource=resource)


def warn_unset_resource(guard: object, host: str) -> None:
    """Warn when an McpApp target's ResourceServer names no resource and the bind is public."""
    from mrtr.auth import ResourceServer  # only called with a guard: auth is loaded already

    if isinstance(guard, ResourceServer) and guard.settings.resource is None \
            and not is_loopback(host):
        log.warning("the app's ResourceServer names no resource: it accepts only tokens for "
                    "http://<the bound address>:<port>/<path>; set AuthSettings(resource=) to "
                    "the public URL of the MCP endpoint (docs/auth.md)")


def check_forwarded(ips: Sequence[str]) -> list[str]:
    """The proxies whose X-Forwarded-For/-Proto uvicorn may believe: addresses, networks, "*".

    Raises ValueError for anything else (uvicorn would take it as a literal that never matches).
    """
    checked: list[str] = []
    for given in ips:
        for item in (part.strip() for part in given.split(",")):
            if not item:
                continue
            try:
                if item != "*":
                    ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError("forwarded-allow-ips must list IP addresses or networks of the "
                                 f"proxies in front (or *), got {item!r}") from None
            checked.append(item)
    return ["*"] if "*" in checked else checked  # uvicorn trusts all only for exactly "*"


