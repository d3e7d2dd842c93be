"""Client profiles for `mrtr check --client-profile NAME`: replay a named client's quirks."""

# Design: a profile is data (a table of profiles.toml, shipped in the wheel) naming one of the
# behaviours below, its parameters and its evidence (which clients, which versions, where it
# was seen), so profiles are added or corrected without code. Each behaviour sends what that
# client sends and reports, under the rule `client-profile`, whether the server would break it.
from __future__ import annotations

import tomllib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from mrtr.check._probe import ANSWERS, Exchange, HttpProbe, Probe, meta
from mrtr.check._rules import Finding

__all__ = ["Profile", "load", "names", "replay"]

_RULE = "client-profile"


@dataclass(frozen=True)
class Profile:
    """One client quirk: the behaviour to replay, its parameters and evidence."""

    name: str
    behaviour: str
    summary: str
    transports: tuple[str, ...]
    request: dict[str, Any]
    evidence: tuple[dict[str, str], ...]


def _catalogue() -> dict[str, Any]:
    text = (resources.files("mrtr.check") / "profiles.toml").read_text("utf-8")
    found = tomllib.loads(text).get("profiles", {})
    return dict(found) if isinstance(found, dict) else {}


def names() -> list[str]:
    """Every shipped profile, by name."""
    return sorted(_catalogue())


def load(name: str) -> Profile:
    """The profile called `name` (KeyError when there is none)."""
    data = _catalogue()[name]
    behaviour = str(data["behaviour"])
    if behaviour not in _BEHAVIOURS:
        raise KeyError(f"{name}: unknown behaviour {behaviour!r}")
    return Profile(name, behaviour, str(data.get("summary", "")),
                   tuple(data.get("transports", ["http", "stdio"])),
                   dict(data.get("request", {})),
                   tuple(dict(e) for e in data.get("evidence", [])))


def _legacy_headers() -> dict[str, str]:
    return {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _initialize(version: str) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "mrtr-check-profile", "version": "1"}}


def _said(ex: Exchange) -> str:
    if ex.failure:
        return ex.failure
    if ex.error_code is not None:
        message = ((ex.response or {}).get("error") or {}).get("message", "")
        return f"error {ex.error_code} {str(message)[:60]!r}"
    status = f"HTTP {ex.status}" if ex.status is not None else "no reply"
    return f"{status}, no result"


async def _session(probe: Probe, channel: int | None, version: str) -> tuple[bool, str]:
    """initialize + notifications/initialized + tools/list on `channel`, 2025 style."""
    http = isinstance(probe, HttpProbe)
    headers = _legacy_headers() if http else None
    init = await probe.rpc_on(channel, "initialize", _initialize(version), headers=headers)
    agreed = (init.result or {}).get("protocolVersion")
    if not isinstance(agreed, str):
        return False, f"initialize ({version}) gave {_said(init)}"
    legacy = {**_legacy_headers(), "MCP-Protocol-Version": agreed}
    session = init.headers.get("mcp-session-id")
    if session:
        legacy["Mcp-Session-Id"] = session
    await probe.notify_on(channel, "notifications/initialized", {},
                          headers=legacy if http else None)
    listed = await probe.rpc_on(channel, "tools/list", {}, headers=legacy if http else None)
    if session and isinstance(probe, HttpProbe):
        await probe.send("DELETE", None, legacy)
    if not isinstance((listed.result or {}).get("tools"), list):
        return False, f"initialize agreed {agreed}, then tools/list gave {_said(listed)}"
    return True, f"a {agreed} session served"


async def _discover_then_initialize(probe: Probe, profile: Profile, ctx: _Context) -> Finding:
    first = await probe.rpc("server/discover", {"_meta": meta()}, fresh=True, keep=True)
    ok, detail = await _session(probe, first.channel, str(profile.request.get(
        "legacy_version", "2025-11-25")))
    probed = "answered" if first.result is not None else _said(first)
    return _found(profile, ok, f"server/discover ({probed}), then on the same connection: "
                  f"{detail}")


async def _no_probe(probe: Probe, profile: Profile, ctx: _Context) -> Finding:
    ex = await probe.rpc("tools/list", {"_meta": meta()}, fresh=True)
    ok = isinstance((ex.result or {}).get("tools"), list)
    return _found(profile, ok, "tools/list with no server/discover before it: "
                  + ("served" if ok else _said(ex)))


async def _legacy_initialize(probe: Probe, profile: Profile, ctx: _Context) -> Finding:
    version = str(profile.request.get("legacy_version", "2025-11-25"))
    first = await probe.rpc("initialize", _initialize(version), fresh=True, keep=True,
                            **({"headers": _legacy_headers()} if isinstance(probe, HttpProbe)
                               else {}))
    await probe.release()
    ok, detail = await _session(probe, None, version) if first.result else (
        False, f"initialize ({version}) gave {_said(first)}")
    return _found(profile, ok, detail)


async def _unrendered(probe: Probe, profile: Profile, ctx: _Context) -> Finding:
    action = str(profile.request.get("action", "cancel"))
    for tool in ctx.tools:
        params: dict[str, Any] = {"_meta": meta(ANSWERS), "name": tool[0], "arguments": tool[1]}
        ex = await probe.rpc("tools/call", params, header_map=tool[2])
        asks = (ex.result or {}).get("inputRequests")
        elicits = {k: v for k, v in (asks.items() if isinstance(asks, dict) else ())
                   if isinstance(v, dict) and v.get("method") == "elicitation/create"}
        if ex.result is None or not elicits:
            continue
        again = {**params, "inputResponses": {k: {"action": action} for k in elicits},
                 "requestState": ex.result.get("requestState")}
        if again["requestState"] is None:
            del again["requestState"]
        reply = await probe.rpc("tools/call", again, header_map=tool[2])
        ok = reply.result is not None or reply.error_code not in (None, -32603)
        return _found(profile, ok, f"{tool[0]!r} asked for a form, answered {action!r}: "
                      + ("handled" if ok else _said(reply)))
    return Finding(_RULE, "skip", "no allowed tool asked for a form (--call-tools)",
                   profile.name)


async def _strict_accept(probe: Probe, profile: Profile, ctx: _Context) -> Finding:
    assert isinstance(probe, HttpProbe)
    accept = str(profile.request.get("accept", "application/json"))
    bad = []
    for method in ("server/discover", "tools/list"):
        params = {"_meta": meta()}
        ex = await probe.rpc(method, params, headers={**probe.headers(method, params),
                                                      "Accept": accept})
        if ex.event_stream:
            bad.append(f"{method}: an event stream, which this client cannot read")
        elif ex.result is None:
            bad.append(f"{method}: {_said(ex)}")
    return _found(profile, not bad, "; ".join(bad) or f"Accept: {accept} served as JSON")


def _found(profile: Profile, ok: bool, detail: str) -> Finding:
    who = profile.evidence[0].get("client", "") if profile.evidence else ""
    tail = "" if ok else f"; this breaks {who}" if who else "; this client would break"
    return Finding(_RULE, "pass" if ok else "fail", detail + tail, profile.name)


@dataclass
class _Context:
    tools: list[tuple[str, dict[str, Any], dict[str, str]]]


_BEHAVIOURS: dict[str, Callable[[Probe, Profile, _Context], Awaitable[Finding]]] = {
    "discover-then-initialize": _discover_then_initialize, "no-probe": _no_probe,
    "legacy-initialize": _legacy_initialize, "unrendered-elicitation": _unrendered,
    "strict-accept": _strict_accept,
}


async def replay(probe: Probe, chosen: list[str],
                 tools: list[tuple[str, dict[str, Any], dict[str, str]]]) -> list[Finding]:
    """Each chosen profile against the server; `tools` are the ones the checker may call."""
    out = []
    transport = "http" if isinstance(probe, HttpProbe) else "stdio"
    for name in chosen:
        profile = load(name)
        if transport not in profile.transports:
            out.append(Finding(_RULE, "skip", f"a {'/'.join(profile.transports)} client "
                               "profile", name))
            continue
        out.append(await _BEHAVIOURS[profile.behaviour](probe, profile, _Context(tools)))
        await probe.release()
    return out
