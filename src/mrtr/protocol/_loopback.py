"""Whether a host is this machine's loopback: the one such check of mrtr.

Issuer URLs may be plain http only on a loopback host (mrtr.auth), `mrtr serve` and `mrtr dev`
derive their defaults from whether the bind address is loopback (mrtr.serving, mrtr.cli), and
the playground is served only on a loopback socket (mrtr.http).
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """`localhost` (any case) or an address in 127.0.0.0/8 or ::1, IPv6 with or without brackets;
    False for any other name or address (a name is not resolved)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
