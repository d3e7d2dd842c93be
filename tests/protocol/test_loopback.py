"""is_loopback: the one loopback check behind issuer URLs, bind defaults and the playground."""

from __future__ import annotations

import pytest

from mrtr.protocol._loopback import is_loopback


@pytest.mark.parametrize("host", ["localhost", "LocalHost", "127.0.0.1", "127.8.9.10", "::1",
                                  "[::1]", "0:0:0:0:0:0:0:1"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "192.168.1.2", "example.com",
                                  "localhost.example.com", "127.0.0.1.nip.io", "", "[", "::2"])
def test_other_hosts(host: str) -> None:
    assert not is_loopback(host)
