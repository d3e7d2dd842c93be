"""HostCheck: Host/Origin allow-lists against DNS rebinding, and 403s that say what to do."""

from __future__ import annotations

import pytest

from mrtr.http._hosts import HostCheck, split_host


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1:8443",
                                  "[::1]:1", "LOCALHOST:80"])
def test_loopback_names_on_any_port_by_default_issue_11(host: str) -> None:
    assert HostCheck().refusal({"host": host.lower()}) is None


@pytest.mark.parametrize("host", ["", "evil.example.com", "localhost.evil.com:80",
                                  "127.0.0.1:abc", "[::1]x", "localhost:80:80"])
def test_other_hosts_are_refused(host: str) -> None:
    assert HostCheck().refusal({"host": host}) is not None


def test_a_name_matches_any_port_and_name_port_only_that_port() -> None:
    check = HostCheck(["mcp.example.com", "api.example.com:8443"])
    assert check.allowed("mcp.example.com") and check.allowed("mcp.example.com:443")
    assert check.allowed("api.example.com:8443")
    assert not check.allowed("api.example.com") and not check.allowed("api.example.com:443")
    assert not check.allowed("localhost:8000")  # an explicit list replaces the loopback default


def test_origins_use_the_same_names_or_an_explicit_origin() -> None:
    check = HostCheck(["mcp.example.com"], ["https://app.example.org/"])
    ok = {"host": "mcp.example.com"}
    assert check.refusal({**ok, "origin": "https://mcp.example.com:8443"}) is None
    assert check.refusal({**ok, "origin": "https://app.example.org"}) is None
    assert check.refusal({**ok, "origin": "ftp://mcp.example.com"}) == (
        "Forbidden: Origin 'ftp://mcp.example.com' not allowed")
    assert check.refusal({**ok, "origin": "null"}) == "Forbidden: Origin 'null' not allowed"


def test_refusals_say_what_to_configure_issue_11() -> None:
    check = HostCheck()
    assert check.refusal({"host": "mcp.example.com:8080"}) == (
        "Forbidden: Host 'mcp.example.com:8080' not allowed; start mrtr serve with "
        "--allow-host mcp.example.com (McpApp: allowed_hosts)")
    origin = check.refusal({"host": "localhost", "origin": "https://app.example.org"})
    assert origin is not None
    assert origin.startswith("Forbidden: Origin 'https://app.example.org' not allowed")
    assert "--allow-host app.example.org" in origin
    junk = check.refusal({"host": "a b" + "x" * 300})
    assert junk is not None and "--allow-host" not in junk and len(junk) < 200


def test_each_host_is_judged_once_issue_20(monkeypatch: pytest.MonkeyPatch) -> None:
    judged: list[str] = []
    judge = HostCheck._judge

    def counting(self: HostCheck, host: str) -> bool:
        judged.append(host)
        return judge(self, host)

    monkeypatch.setattr(HostCheck, "_judge", counting)
    check = HostCheck()
    verdicts = [check.allowed(h) for h in ["localhost:1", "evil.example", "localhost:1",
                                            "evil.example"]]
    assert verdicts == [True, False, True, False]
    assert judged == ["localhost:1", "evil.example"]
    assert check.seen == {"localhost:1": True, "evil.example": False}


def test_judgements_are_remembered_but_bounded() -> None:
    check = HostCheck()
    for n in range(200):
        check.allowed(f"junk{n}.example.com")
    assert len(check.seen) == 64
    assert check.allowed("localhost:1234")  # still judged correctly past the bound


@pytest.mark.parametrize(("host", "parts"), [
    ("a.example:80", ("a.example", "80")), ("[::1]:8000", ("[::1]", "8000")),
    ("[::1]", ("[::1]", "")), ("a.example", ("a.example", "")),
    ("[::1]x]:80", ("[::1]", "x]:80")),  # the first "]" ends an IPv6 name
])
def test_split_host(host: str, parts: tuple[str, str]) -> None:
    assert split_host(host) == parts


WILDCARD_ADVICE = ("{name} is the wildcard bind address, not a host name: connect to {to} or "
                   "localhost{port}, or to a name given to mrtr serve with --allow-host NAME "
                   "(McpApp: allowed_hosts)")


@pytest.mark.parametrize(("headers", "shown", "name", "to", "port"), [
    ({"host": "0.0.0.0:8000"}, "Host '0.0.0.0:8000'", "0.0.0.0", "127.0.0.1:8000", ":8000"),
    ({"host": "0.0.0.0"}, "Host '0.0.0.0'", "0.0.0.0", "127.0.0.1", ""),
    ({"host": "[::]:9"}, "Host '[::]:9'", "[::]", "[::1]:9", ":9"),
    ({"host": "localhost", "origin": "http://0.0.0.0:8000"}, "Origin 'http://0.0.0.0:8000'",
     "0.0.0.0", "127.0.0.1:8000", ":8000"),
])
def test_19_the_wildcard_address_is_refused_with_advice_to_use_a_name(
    headers: dict[str, str], shown: str, name: str, to: str, port: str
) -> None:
    advice = WILDCARD_ADVICE.format(name=name, to=to, port=port)
    assert HostCheck().refusal(headers) == f"Forbidden: {shown} not allowed; {advice}"


def test_names_and_origins_compare_case_blind_and_without_a_trailing_slash_issue_20() -> None:
    check = HostCheck([" MCP.Example.com ", "API.example.com:8443"],
                      ["HTTPS://App.Example.org/"])
    for host in ["mcp.example.com", "MCP.EXAMPLE.COM:80", " Mcp.Example.Com ",
                 "api.EXAMPLE.com:8443"]:
        assert check.refusal({"host": host}) is None, host
    ok = {"host": "mcp.example.com"}
    for origin in ["https://app.example.org", "https://APP.example.org/", "HTTPS://app.example.org",
                   "https://mcp.example.com/", "HTTP://MCP.example.com:8080//"]:
        assert check.refusal({**ok, "origin": origin}) is None, origin
    for origin in ["/https://app.example.org", "https://app.example.org/x"]:
        assert check.refusal({**ok, "origin": origin}) is not None, origin


def test_a_missing_or_empty_host_is_refused_issue_20() -> None:
    """DNS rebinding: no Host is no proof of anything; it is refused, and the check never
    crashes on it."""
    for headers in [{}, {"host": ""}, {"host": "  "}]:
        assert HostCheck().refusal(headers) == "Forbidden: Host '' not allowed"
    assert HostCheck(["mcp.example.com"]).refusal({}) == "Forbidden: Host '' not allowed"


ADVICE = "Forbidden: Host {!r} not allowed; start mrtr serve with --allow-host {} " \
         "(McpApp: allowed_hosts)"


def test_advice_only_for_names_worth_echoing_issue_20() -> None:
    """The 403 suggests `--allow-host NAME` only for a printable name without spaces of at
    most 100 characters; the value shown is cut at 100 characters."""
    check = HostCheck()
    name = "a" * 100
    assert check.refusal({"host": name}) == ADVICE.format(name, name)
    long = "a" * 101
    assert check.refusal({"host": long}) == f"Forbidden: Host {'a' * 100 + '...'!r} not allowed"
    for junk in ["a b", "a\x01b"]:
        assert check.refusal({"host": junk}) == f"Forbidden: Host {junk!r} not allowed"


def test_an_origin_with_two_schemes_is_judged_by_the_first_issue_20() -> None:
    refusal = HostCheck().refusal({"host": "localhost", "origin": "http://x.example://y"})
    assert refusal is not None and "--allow-host x.example " in refusal
