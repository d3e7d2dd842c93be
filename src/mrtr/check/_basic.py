"""Probes that need no tool call: discovery, listings, error codes, HTTP rules, dual-era."""

# Design: each probe sends a handful of requests that cannot have side effects (discovery,
# listings, a tool name that cannot exist) and returns Findings; the 2026-07-28 replies also go
# to the Recorder so the shape rules see them.
from __future__ import annotations

import json
from typing import Any

from mrtr.check._observe import Recorder
from mrtr.check._probe import Exchange, HttpProbe, Probe, meta
from mrtr.check._rules import Finding

__all__ = ["discover", "dual_era", "error_codes", "judge_header", "legacy_initialize",
           "legacy_origin", "listings", "seen", "transport", "unreachable"]

NO_TOOL = "mrtr-check-no-such-tool"
_LEGACY = "2025-11-25"


def seen(ex: Exchange) -> str:
    """What came back, in a few words: HTTP status, failure, error code and message."""
    status = f"HTTP {ex.status}, " if ex.status is not None else ""
    if ex.failure:
        return f"{status}{ex.failure}"
    if ex.error_code is not None:
        message = ((ex.response or {}).get("error") or {}).get("message")
        said = f" {str(message)[:60]!r}" if message else ""
        return f"{status}JSON-RPC error {ex.error_code}{said}"
    return f"{status}result" if ex.result is not None else f"{status}no JSON-RPC reply"


async def discover(probe: Probe, rec: Recorder) -> Finding:
    ex = rec.record("server/discover", await probe.rpc("server/discover", {"_meta": meta()}))
    result = ex.result or {}
    versions = result.get("supportedVersions")
    if isinstance(versions, list) and "2026-07-28" in versions and isinstance(
            result.get("capabilities"), dict):
        return Finding("stateless.discover", "pass", f"supportedVersions {versions}")
    return Finding("stateless.discover", "fail",
                   f"no valid DiscoverResult with 2026-07-28 ({seen(ex)})")


def unreachable(rec: Recorder) -> bool:
    """Discovery got no HTTP status and no message at all: nothing is listening (or the
    command did not start)."""
    label, ex = rec.seen[-1]
    return ex.status is None and ex.response is None and bool(ex.failure)


async def listings(probe: Probe, rec: Recorder, pages: int = 5) -> dict[str, list[Any]]:
    """tools/prompts/resources lists (a few pages each); an error leaves that list empty."""
    found: dict[str, list[Any]] = {}
    for method, key in (("tools/list", "tools"), ("prompts/list", "prompts"),
                        ("resources/list", "resources")):
        found[key] = []
        params: dict[str, Any] = {"_meta": meta()}
        for page in range(pages):
            ex = rec.record(f"{method} page {page + 1}", await probe.rpc(method, params))
            result = ex.result or {}
            items = result.get(key)
            if isinstance(items, list):
                found[key] += [i for i in items if isinstance(i, dict)]
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str):
                break
            params = {"_meta": meta(), "cursor": cursor}
    return found


async def error_codes(probe: Probe, rec: Recorder) -> list[Finding]:
    tool = rec.record(f"tools/call {NO_TOOL}", await probe.rpc(
        "tools/call", {"_meta": meta(), "name": NO_TOOL, "arguments": {}}))
    method = await probe.rpc("mrtr-check/no-such-method", {"_meta": meta()})
    out = []
    if tool.error_code == -32602:
        out.append(Finding("shape.error-codes", "pass", "unknown tool -32602"))
    elif (tool.result or {}).get("isError") is True:
        out.append(Finding("shape.error-codes", "warn", "unknown tool answered with a result "
                           "carrying isError: true, not error -32602 (the reference Python SDK "
                           "and FastMCP do this; clients cannot tell it from a tool failure)"))
    else:
        out.append(Finding("shape.error-codes", "fail",
                           f"unknown tool gave {seen(tool)}, not -32602"))
    if method.error_code == -32601:
        out.append(Finding("shape.error-codes", "pass", "unknown method -32601"))
    else:
        out.append(Finding("shape.error-codes", "fail",
                           f"unknown method gave {seen(method)}, not -32601"))
    return out


async def transport(probe: HttpProbe, body_mib: int,
                    param_tool: tuple[str, dict[str, Any], dict[str, str]] | None,
                    modern: bool = True, get_timeout: float = 2.0) -> list[Finding]:
    """The HTTP rules; `param_tool` (name, arguments, header map) may be called to test
    `Mcp-Param-*` with a contradicting value. `modern` False (discovery failed): only the rules
    that hold for any Streamable HTTP server (Origin, body limit) run."""
    if not modern:
        return [await legacy_origin(probe), await _body_limit(probe, body_mib)]
    # A refusal only tells something when the same request, sent right, is served.
    params = {"_meta": meta()}
    baseline = await probe.rpc("tools/list", params)
    found: list[Finding] = []
    if baseline.status == 200 and baseline.response is not None:
        found += await _headers(probe, param_tool)
        found += await _origin(probe)
    else:
        why = f"a well-formed tools/list is not served ({seen(baseline)})"
        found = [Finding("transport.headers", "skip", why),
                 Finding("transport.origin", "skip", why)]
    return [*found, await _body_limit(probe, body_mib), await _get(probe, get_timeout)]


async def _headers(probe: HttpProbe,
                   param_tool: tuple[str, dict[str, Any], dict[str, str]] | None
                   ) -> list[Finding]:
    listing = {"_meta": meta()}
    call = {"_meta": meta(), "name": NO_TOOL, "arguments": {}}
    cases: dict[str, tuple[str, dict[str, Any], dict[str, str]]] = {
        "Mcp-Method contradicting the body": (
            "tools/list", listing, {"Mcp-Method": "prompts/list"}),
        "Mcp-Name contradicting the body": ("tools/call", call, {"Mcp-Name": NO_TOOL + "-x"}),
        MISSING: ("tools/list", listing, {"MCP-Protocol-Version": ""}),
    }
    if param_tool is not None:
        name, args, header_map = param_tool
        arg, header = next(iter(header_map.items()))
        wrong = "mrtr-check-mismatch" if args.get(arg) != "mrtr-check-mismatch" else "other"
        cases[f"Mcp-Param-{header} contradicting argument {arg!r}"] = (
            "tools/call", {"_meta": meta(), "name": name, "arguments": args},
            {f"Mcp-Param-{header}": wrong})
    out = []
    for case, (method, params, change) in cases.items():
        headers = {**probe.headers(method, params), **change}
        headers = {k: v for k, v in headers.items() if v}
        out.append(judge_header(case, await probe.rpc(method, params, headers=headers)))
    return out


MISSING = "no MCP-Protocol-Version"


def judge_header(case: str, ex: Exchange) -> Finding:
    """400 with -32020 passes; a 400 with another error (e.g. "Missing session ID") does not.
    A missing MCP-Protocol-Version may be served as 2025-03-26 (the spec's carve-out)."""
    if ex.status == 400 and ex.error_code == -32020:
        return Finding("transport.headers", "pass", f"{case}: 400 + -32020")
    if case == MISSING and ex.status == 200 and ex.result is not None:
        return Finding("transport.headers", "pass", f"{case}: served (a server that also "
                       "serves pre-2025-06-18 clients MAY treat it as 2025-03-26)")
    if case == MISSING and ex.status == 400 and ex.response is not None:
        return Finding("transport.headers", "warn", f"{case}: {seen(ex)}, not -32020: read "
                       "as a 2025-03-26 request (the spec's carve-out), but a 2026-07-28 "
                       "client cannot tell what is wrong")
    return Finding("transport.headers", "fail", f"{case}: {seen(ex)}, not HTTP 400 + -32020")


async def _origin(probe: HttpProbe) -> list[Finding]:
    params = {"_meta": meta()}
    headers = {**probe.headers("tools/list", params), "Origin": "http://mrtr-check.invalid"}
    ex = await probe.rpc("tools/list", params, headers=headers)
    origin = (Finding("transport.origin", "pass", "foreign Origin gets 403") if ex.status == 403
              else Finding("transport.origin", "fail",
                           f"foreign Origin gave {seen(ex)}, not 403"))
    host = await probe.rpc("tools/list", params,
                           headers={**probe.headers("tools/list", params),
                                    "Host": "mrtr-check.invalid"})
    if host.status is not None and 400 <= host.status < 500:
        return [origin, Finding("transport.origin", "pass", f"foreign Host gets {host.status}")]
    return [origin, Finding("transport.origin", "warn", f"foreign Host gave {seen(host)}: "
                            "a local server should check Host (DNS rebinding)")]


async def _body_limit(probe: HttpProbe, mib: int) -> Finding:
    params = {"_meta": meta(), "padding": "x" * (mib * 1024 * 1024)}
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": params})
    ex = await probe.post(body.encode(), probe.headers("tools/list", params))
    if ex.status is not None and 400 <= ex.status < 500:
        return Finding("transport.body-limit", "pass", f"{mib} MiB body refused with {ex.status}")
    if ex.failure and ex.status is None:
        return Finding("transport.body-limit", "pass",
                       f"{mib} MiB body: connection closed ({ex.failure})")
    return Finding("transport.body-limit", "warn", f"{mib} MiB body accepted ({seen(ex)})")


async def _get(probe: HttpProbe, timeout: float) -> Finding:
    ex = await probe.send("GET", None, {"Accept": "text/event-stream"}, timeout=timeout)
    if ex.status in (400, 405):
        return Finding("transport.get", "pass", f"GET gives {ex.status}")
    if ex.status == 200 and ex.failure.startswith("TimeoutError"):
        return Finding("transport.get", "warn", f"GET opened a stream still open after "
                       f"{timeout:g} s (HTTP 200), not 405: it holds a connection for nothing")
    if ex.status is None and ex.failure.startswith("TimeoutError"):
        return Finding("transport.get", "warn", f"GET got no answer within {timeout:g} s, "
                       "not 405")
    return Finding("transport.get", "warn", f"GET gave {seen(ex)}, not 405")


async def legacy_initialize(probe: Probe, extra: dict[str, str] | None = None) -> Exchange:
    """A 2025-11-25 `initialize` on a fresh connection (its session deleted after)."""
    params = {"protocolVersion": _LEGACY, "capabilities": {},
              "clientInfo": {"name": "mrtr-check", "version": "1"}}
    if not isinstance(probe, HttpProbe):
        return await probe.rpc("initialize", params, fresh=True)
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    ex = await probe.rpc("initialize", params, headers={**headers, **(extra or {})}, fresh=True)
    session = ex.headers.get("mcp-session-id")
    if session:
        await probe.send("DELETE", None, {"Mcp-Session-Id": session, **headers})
    return ex


async def dual_era(probe: Probe) -> Finding:
    return _judge_initialize(await legacy_initialize(probe))


async def legacy_origin(probe: HttpProbe) -> Finding:
    """The Origin rule for a server that does not speak 2026-07-28: on the request it does
    serve, a 2025 `initialize` (a foreign Origin accepted there is as bad)."""
    plain = await legacy_initialize(probe)
    if plain.result is None:
        return Finding("transport.origin", "skip",
                       f"a 2025 initialize is not served either ({seen(plain)})")
    foreign = await legacy_initialize(probe, {"Origin": "http://mrtr-check.invalid"})
    if foreign.status == 403:
        return Finding("transport.origin", "pass", "foreign Origin on a 2025 initialize gets 403")
    return Finding("transport.origin", "fail",
                   f"foreign Origin on a 2025 initialize gave {seen(foreign)}, not 403")


def _judge_initialize(ex: Exchange) -> Finding:
    version = (ex.result or {}).get("protocolVersion")
    if isinstance(version, str):
        return Finding("dual-era.initialize", "pass", f"2025 session served (version {version})")
    error = (ex.response or {}).get("error")
    text = json.dumps(error) if isinstance(error, dict) else ""
    if "2026-07-28" in text:
        return Finding("dual-era.initialize", "pass",
                       "modern only; the error names the supported versions")
    return Finding("dual-era.initialize", "fail",
                   f"initialize gave {seen(ex)} without naming supported versions")
