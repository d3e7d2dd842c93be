"""The rule catalogue of `mrtr check`: stable ids, a one-line why and how to fix each."""

# Design: a rule is data (id, why, fix, what it needs); the probes that decide a rule live in the
# _probe_* modules and return Findings naming the rule id. The catalogue is an immutable tuple, so
# docs/check.md, --only/--skip and SARIF all read the same list.
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["RULES", "Finding", "Rule", "Status", "rule"]

Status: TypeAlias = Literal["pass", "fail", "warn", "skip", "info"]


@dataclass(frozen=True)
class Rule:
    """One check; `http_only` rules skip over stdio, `calls_tools` ones need --call-tools."""

    id: str
    title: str
    why: str
    fix: str
    http_only: bool = False
    calls_tools: bool = False


@dataclass(frozen=True)
class Finding:
    """The verdict of one rule (or of one tool under a rule), with what was seen."""

    rule: str
    status: Status
    detail: str
    subject: str = ""


RULES: tuple[Rule, ...] = (
    Rule("shape.result-type", "Every result carries a valid resultType",
         "2026-07-28 clients tell a final result from a request for input by `resultType`.",
         "Add `resultType: \"complete\"` (or `input_required`, `task`) to every result."),
    Rule("shape.input-required", "input_required results are well formed",
         "A client can only answer an `inputRequests` map of {method, params} objects, and must "
         "echo a string `requestState`.",
         "Send `inputRequests` as a map of objects with `method`, and `requestState` as a string."),
    Rule("shape.complete", "complete results carry no inputRequests or requestState",
         "A client that sees `complete` stops; input requests on it are lost or misread.",
         "Drop `inputRequests`/`requestState` from final results."),
    Rule("shape.task", "No task result for a client that did not declare the tasks extension",
         "Only a client declaring `io.modelcontextprotocol/tasks` can poll a task.",
         "Answer synchronously (or -32021) unless the request declares the extension."),
    Rule("shape.error-codes", "Errors use the codes the spec freezes",
         "Clients branch on codes: an unknown tool is -32602, an unknown method -32601.",
         "Return -32602 for an unknown tool and -32601 for an unknown method."),
    Rule("stateless.discover", "server/discover answers",
         "2026-07-28 clients learn versions and capabilities from `server/discover`.",
         "Implement `server/discover` with `supportedVersions` including 2026-07-28."),
    Rule("stateless.no-session", "No Mcp-Session-Id on 2026-07-28 replies",
         "The 2026-07-28 transport has no sessions; a session id invites sticky routing.",
         "Never mint `Mcp-Session-Id` for 2026-07-28 requests.", http_only=True),
    Rule("stateless.no-push", "No server-to-client requests on a 2026-07-28 stream",
         "A 2026-07-28 server never sends requests; it answers `input_required` instead.",
         "Replace server requests (elicitation, sampling, roots) by an input_required result."),
    Rule("stateless.fresh-connection", "A later round succeeds on a fresh connection or replica",
         "Behind a load balancer round 2 reaches another connection or replica; work keyed to "
         "the connection or held in memory is lost there.",
         "Carry everything a round needs in `requestState` (sealed), keep no per-connection state.",
         calls_tools=True),
    Rule("sealed.tamper", "Tampered requestState is rejected",
         "`requestState` passes through the client: a flipped, truncated or extended state must "
         "not be accepted.",
         "Protect the state with an AEAD or MAC and answer -32602 when it does not verify.",
         calls_tools=True),
    Rule("sealed.integrity", "A readable requestState cannot be forged",
         "A state the client can read and rewrite (plain or base64 JSON) lets it change what the "
         "server believes it asked or was told.",
         "Seal the state (AEAD) or sign it (MAC) and verify before use.", calls_tools=True),
    Rule("sealed.bound-arguments", "requestState is bound to the tool's arguments",
         "A state minted for one set of arguments replayed with others lets a client reuse an "
         "approval (a confirmation, a payment) for something else.",
         "Bind the state to the tool name and a digest of the arguments, and check both.",
         calls_tools=True),
    Rule("sealed.bound-tool", "requestState is bound to the tool",
         "A state minted by one tool must not be accepted by another.",
         "Bind the state to the method and tool name.", calls_tools=True),
    Rule("sealed.expiry", "An expired requestState is rejected",
         "A state that never expires can be replayed forever.",
         "Put an expiry in the sealed state and reject it after that (check with --wait).",
         calls_tools=True),
    Rule("sealed.replay", "Re-sending a completed final round (informational)",
         "A final round re-sent after a lost reply, or by an attacker, may repeat a side effect.",
         "Make final rounds single-use or idempotent (mrtr: the exactly-once store).",
         calls_tools=True),
    Rule("transport.headers", "Mcp-* headers are checked against the body",
         "Proxies route on `Mcp-Method`/`Mcp-Name`; a server that trusts a body the headers "
         "contradict can be steered past them.",
         "Compare MCP-Protocol-Version, Mcp-Method and Mcp-Name with the body: 400 + -32020.",
         http_only=True),
    Rule("transport.origin", "A foreign Origin is refused",
         "Without an Origin check a web page can drive a local server (DNS rebinding).",
         "Answer 403 to a request whose Origin is not allowed.", http_only=True),
    Rule("transport.sse-buffering", "Event streams are not buffered by proxies",
         "nginx buffers responses unless told not to; progress then arrives all at the end.",
         "Send `X-Accel-Buffering: no` on text/event-stream replies.", http_only=True),
    Rule("transport.body-limit", "Oversized bodies are refused",
         "An unbounded body lets one request exhaust the server's memory.",
         "Refuse bodies over a limit with 413.", http_only=True),
    Rule("transport.get", "GET on the endpoint gets 405 (or a legacy session check)",
         "A 2026-07-28 endpoint has no GET stream; an open GET holds a connection for nothing.",
         "Answer GET with 405 (a dual-era server may answer 400 without a session).",
         http_only=True),
    Rule("dual-era.initialize", "A 2025 initialize gets a session or names supported versions",
         "Most clients in use still start with `initialize`; they need a session or an error "
         "that names the versions to fall back to.",
         "Serve 2025-11-25 sessions (mrtr does), or answer with an error listing supported "
         "versions."),
)

_BY_ID = {r.id: r for r in RULES}


def rule(rule_id: str) -> Rule:
    """The rule with this id (KeyError for an unknown id)."""
    return _BY_ID[rule_id]
