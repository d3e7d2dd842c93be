"""`mrtr check`'s run: which probes go out, in what order, within the budget."""

# Design: probes run in a fixed order (discovery, listings, error codes, transport, tool flows,
# sealed-state probes, dual-era) and stop at the budget; every rule ends with at least one
# Finding, a skip saying why when it could not run. Tools are called only when the options say
# so, since calling a tool can have side effects.
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from mrtr.check import _basic, _profiles, _replay, _sealed
from mrtr.check._flows import Flow, drive
from mrtr.check._observe import Recorder
from mrtr.check._probe import Budget, BudgetExceeded, HttpProbe, Probe, StdioProbe
from mrtr.check._rules import RULES, Finding, rule
from mrtr.check._values import arguments
from mrtr.protocol import ToolHeaderError, tool_header_map

__all__ = ["Options", "Report", "plan", "run"]

SENDS = {
    "stateless.discover": "1 server/discover",
    "shape": "tools/list, prompts/list, resources/list (up to 5 pages each); the replies of "
             "every other probe",
    "shape.error-codes": f"tools/call of {_basic.NO_TOOL!r}; an unknown method",
    "transport.headers": "3 requests with contradicting or missing Mcp-* headers",
    "transport.origin": "tools/list with a foreign Origin",
    "transport.body-limit": "one oversized tools/list body",
    "transport.get": "one GET",
    "stateless.fresh-connection": "each allowed tool's rounds 2+ on a fresh connection/replica",
    "sealed": "per allowed tool with a requestState: 3 tampered, 1 forged, 1 re-bound to other "
              "arguments, 1 to another tool, 1 replay of the final round",
    "sealed.expiry": "one round re-sent after --wait seconds",
    "dual-era.initialize": "one 2025-11-25 initialize on a fresh connection (and its DELETE)",
}


@dataclass
class Options:
    """What to check and how far it may go."""

    target: str
    stdio: bool = False
    replicas: list[str] = field(default_factory=list)
    call_tools: bool = False
    allow_tools: list[str] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)
    arguments: dict[str, dict[str, Any]] = field(default_factory=dict)
    wait: float = 0.0
    only: list[str] = field(default_factory=list)
    skip: list[str] = field(default_factory=list)
    max_requests: int = 300
    seconds: float = 120.0
    timeout: float = 10.0
    max_tools: int = 30
    body_mib: int = 20
    effects_probe: str = ""
    get_timeout: float = 2.0
    profiles: list[str] = field(default_factory=list)

    def wanted(self, rule_id: str) -> bool:
        def hit(patterns: Iterable[str]) -> bool:
            return any(rule_id == p or rule_id.startswith(p.rstrip(".") + ".") for p in patterns)
        return (not self.only or hit(self.only)) and not hit(self.skip)

    def may_call(self, tool: str) -> bool:
        return self.call_tools or tool in self.allow_tools


@dataclass
class Report:
    """The findings of one run, in catalogue order, and what the run used."""

    target: str
    findings: list[Finding]
    requests: int
    seconds: float = 0.0
    unreachable: bool = False

    @property
    def failed(self) -> bool:
        return any(f.status == "fail" for f in self.findings)

    @property
    def warned(self) -> bool:
        return any(f.status == "warn" for f in self.findings)

    def exit_code(self, fail_on: str = "fail") -> int:
        """The exit-code contract: 0 nothing at or above `fail_on`, 1 a FAIL (or a WARN with
        fail_on="warn"), 3 the target could not be reached or started (2 is a usage error)."""
        if self.unreachable:
            return 3
        return 1 if self.failed or (fail_on == "warn" and self.warned) else 0


def plan(options: Options) -> list[tuple[str, str]]:
    """(rule id, what it would send) for every rule this run would try; nothing is sent."""
    out = []
    for r in RULES:
        if not options.wanted(r.id) or (r.http_only and options.stdio):
            continue
        key = r.id if r.id in SENDS else r.id.split(".")[0]
        sends = SENDS.get(key, "judged on the replies of the other probes")
        if r.calls_tools and not (options.call_tools or options.allow_tools):
            sends = "nothing: tools are called only with --call-tools or --allow-tool"
        out.append((r.id, sends))
    return out


async def run(options: Options) -> Report:
    budget = Budget(options.max_requests, options.seconds)
    probe: Probe = (StdioProbe(options.target, budget, timeout=options.timeout) if options.stdio
                    else HttpProbe(options.target, budget, timeout=options.timeout))
    rec = Recorder()
    found: list[Finding] = []
    state = _State()
    try:
        await _probes(probe, rec, options, found, state)
    except BudgetExceeded:
        pass
    finally:
        await probe.aclose()
    found += rec.findings(http=not options.stdio)
    used = options.max_requests - budget.requests
    return Report(options.target, _complete(found, options, budget, state), used,
                  round(time.monotonic() - budget.started, 2), state.unreachable)


@dataclass
class _State:
    """What discovery taught: does the server speak 2026-07-28, did it answer at all."""

    modern: bool = True
    unreachable: bool = False


async def _probes(probe: Probe, rec: Recorder, options: Options, found: list[Finding],
                  state: _State) -> None:
    discovered = await _basic.discover(probe, rec)
    found.append(discovered)
    state.modern = discovered.status == "pass"
    state.unreachable = _basic.unreachable(rec)
    if state.unreachable:
        return
    lists = await _basic.listings(probe, rec)
    if state.modern and options.wanted("shape.error-codes"):
        found += await _basic.error_codes(probe, rec)
    if isinstance(probe, HttpProbe) and any(options.wanted(r.id) for r in RULES
                                            if r.id.startswith("transport.")):
        found += await _basic.transport(probe, options.body_mib,
                                        _param_tool(lists["tools"], options), state.modern,
                                        options.get_timeout)
    if state.modern and any(options.wanted(r.id) for r in RULES if r.calls_tools):
        found += await _tools(probe, rec, options, lists["tools"])
    if options.wanted("dual-era.initialize"):
        found.append(await _basic.dual_era(probe))
    if options.profiles and options.wanted("client-profile"):
        callable_ = [(f.tool, f.arguments, f.header_map) for f in
                     (_flow(t, options) for t in lists["tools"]
                      if options.may_call(str(t.get("name")))) if f is not None]
        found += await _profiles.replay(probe, options.profiles, callable_)


async def _tools(probe: Probe, rec: Recorder, options: Options,
                 tools: list[dict[str, Any]]) -> list[Finding]:
    flows = []
    for tool in [t for t in tools if options.may_call(str(t.get("name")))][: options.max_tools]:
        flow = _flow(tool, options)
        if flow is not None:
            flows.append((flow, tool.get("inputSchema") or {}))
    effects = ((options.effects_probe, options.arguments.get(options.effects_probe, {}))
               if options.effects_probe else None)
    out: list[Finding] = []
    expired = False
    for flow, schema in flows:
        # One flow at a time: drive it, probe its states where they were minted, then close
        # the connections or processes it kept open.
        await drive(probe, rec, flow, options.answers, options.replicas)
        out += flow.findings
        first = flow.replies[0] if flow.replies else None
        if first is not None and first.result is None:  # a call that failed is not hidden
            out.append(Finding("stateless.fresh-connection", "skip",
                               f"round 1 gave {_basic.seen(first)}", flow.tool))
        elif flow.problem:
            out.append(Finding("stateless.fresh-connection", "skip", flow.problem, flow.tool))
        if flow.states:
            other = next((f for f, _ in flows if f is not flow), None)
            out += await _sealed.probe_flow(probe, flow, schema, other)
            out.append(await _replay.replay(probe, flow, effects))
            if not expired and options.wanted("sealed.expiry"):
                out.append(await _replay.expiry(probe, flow, options.wait))
                expired = True
        await probe.release()
    return out


def _param_tool(tools: list[dict[str, Any]],
                options: Options) -> tuple[str, dict[str, Any], dict[str, str]] | None:
    """An allowed tool with an `x-mcp-header` argument present in its generated arguments."""
    for tool in tools:
        flow = _flow(tool, options) if options.may_call(str(tool.get("name"))) else None
        if flow is not None and any(a in flow.arguments for a in flow.header_map):
            mapped = {a: h for a, h in flow.header_map.items() if a in flow.arguments}
            return flow.tool, flow.arguments, mapped
    return None


def _flow(tool: dict[str, Any], options: Options) -> Flow | None:
    name = str(tool.get("name"))
    found = tool.get("inputSchema")
    schema: dict[str, Any] = found if isinstance(found, dict) else {}
    try:
        header_map = tool_header_map(schema)
    except ToolHeaderError:
        return None
    args = options.arguments.get(name, arguments(schema))
    return Flow(name, dict(args), header_map)


def _complete(found: list[Finding], options: Options, budget: Budget,
              state: _State) -> list[Finding]:
    """Findings in catalogue order, filtered, judged by the rule's level (a SHOULD is never a
    FAIL), with a skip for every rule that has none. Once discovery fails the 2026-07-28 rules
    are skipped for that reason, whatever the knock-on replies were."""
    out = []
    for r in RULES:
        if not options.wanted(r.id):
            continue
        if state.unreachable and r.id != "stateless.discover":
            out.append(Finding(r.id, "skip", "the server could not be reached"))
            continue
        if not state.modern and r.modern:
            out.append(Finding(r.id, "skip", "server does not speak 2026-07-28 "
                               "(server/discover failed)"))
            continue
        mine = [replace(f, status=r.judged(f.status)) for f in found if f.rule == r.id]
        out += mine or [Finding(r.id, "skip", _why_not(r.id, options, budget))]
    return out


def _why_not(rule_id: str, options: Options, budget: Budget) -> str:
    r = rule(rule_id)
    if r.http_only and options.stdio:
        return "HTTP only"
    if r.id == "client-profile":
        return "give --client-profile NAME to replay a client's known behaviour"
    if r.calls_tools and not (options.call_tools or options.allow_tools):
        return "tools are called only with --call-tools or --allow-tool NAME"
    if budget.requests <= 0:
        return "the request budget ran out (--max-requests)"
    if r.calls_tools:
        return "no allowed tool asked for input with a requestState"
    return "not reached (time budget, --seconds)"
