"""The rule catalogue of `mrtr check`: stable ids, the spec sentence, level, why and fix."""

# Design: a rule is data (id, why, fix, the spec sentence it checks and its level, what it
# needs); the probes that decide a rule live in the other modules and return Findings naming the
# rule id. The level decides how bad a violation is: a MUST gives FAIL, a SHOULD or an
# ADVICE (reference-implementation practice, no spec sentence) gives WARN, INFO never fails.
# `modern` rules are about 2026-07-28 itself and are skipped once discovery shows the server
# does not speak it (no knock-on FAILs). The catalogue is an immutable tuple, so docs/check.md,
# --only/--skip, SARIF and JUnit all read the same list.
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

__all__ = ["RULES", "Finding", "Level", "Rule", "Status", "rule"]

Status: TypeAlias = Literal["pass", "fail", "warn", "skip", "info"]
Level: TypeAlias = Literal["MUST", "SHOULD", "ADVICE", "INFO"]


@dataclass(frozen=True)
class Rule:
    """One check; `http_only` rules skip over stdio, `calls_tools` ones need --call-tools."""

    id: str
    title: str
    why: str
    fix: str
    level: Level = "MUST"
    cite: str = ""
    http_only: bool = False
    calls_tools: bool = False
    modern: bool = True

    def judged(self, status: Status) -> Status:
        """A violation of a SHOULD or an ADVICE rule is a warning, never a failure."""
        return "warn" if status == "fail" and self.level != "MUST" else status


@dataclass(frozen=True)
class Finding:
    """The verdict of one rule (or of one tool under a rule), with what was seen."""

    rule: str
    status: Status
    detail: str
    subject: str = ""


_CATALOGUE: tuple[Rule, ...] = (
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
         "A state the client can read and rewrite (plain or base64 JSON, or a token whose MAC "
         "is not checked) lets it change what the server believes it asked or was told.",
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
    Rule("client-profile", "Known client behaviours (--client-profile NAME) do not break",
         "Real clients have quirks (discover then initialize on one connection, no probe, "
         "2025 defaults over stdio, declared-but-unrendered capabilities, strict Accept); a "
         "server that breaks on one breaks for that client's users.",
         "See the profile's evidence (src/mrtr/check/profiles.toml) and serve that "
         "behaviour.", modern=False),
)

_S = "spec 2026-07-28 "
# id -> (level, the spec sentence it checks, is a 2026-07-28 rule)
_SPEC: dict[str, tuple[Level, str, bool]] = {
    "shape.result-type": ("MUST", _S + "basic/index: every result MUST carry `resultType`.",
                          True),
    "shape.input-required": ("MUST", _S + "mrtr.mdx server rule 6: an InputRequiredResult MUST "
                             "include at least one of `inputRequests` or `requestState`.", True),
    "shape.complete": ("SHOULD", _S + "schema.ts: `inputRequests`/`requestState` belong to "
                       "InputRequiredResult only (no sentence forbids them on a complete result)."
                       , True),
    "shape.task": ("MUST", _S + "basic/index#capabilities: a server MUST NOT rely on a "
                   "capability the client did not declare.", True),
    "shape.error-codes": ("MUST", _S + "server/tools: protocol errors (unknown tool) are "
                          "-32602; JSON-RPC 2.0: an unknown method is -32601. Reference SDKs "
                          "answering an unknown tool with isError get a WARN.", True),
    "stateless.discover": ("MUST", _S + "basic/versioning: the server MUST implement "
                           "`server/discover`.", False),
    "stateless.no-session": ("SHOULD", _S + "transports/streamable-http: a server that speaks "
                             "only this revision SHOULD ... ignore Mcp-Session-Id (never mint "
                             "it).", True),
    "stateless.no-push": ("MUST", _S + "basic/patterns: servers MUST NOT initiate JSON-RPC "
                          "requests.", True),
    "stateless.fresh-connection": ("MUST", _S + "basic/index#statelessness: servers MUST NOT "
                                   "rely on earlier requests on the same connection; a "
                                   "connection or stdio process is not a session.", True),
    "sealed.tamper": ("MUST", _S + "mrtr.mdx server rule 4: the server MUST integrity-protect "
                      "`requestState` and MUST reject state that fails verification.", True),
    "sealed.integrity": ("MUST", _S + "mrtr.mdx server rule 4: a received `requestState` MUST "
                         "be treated as attacker-controlled ... MUST integrity-protect it.",
                         True),
    "sealed.bound-arguments": ("SHOULD", _S + "mrtr.mdx server rule 5(c): the server SHOULD "
                               "bind the originating request (method plus a digest of the "
                               "salient params).", True),
    "sealed.bound-tool": ("SHOULD", _S + "mrtr.mdx server rule 5(c): bind the method plus a "
                          "digest of the salient params (the tool name).", True),
    "sealed.expiry": ("SHOULD", _S + "mrtr.mdx server rule 5(b): the server SHOULD bind a short "
                      "expiry.", True),
    "sealed.replay": ("INFO", _S + "mrtr.mdx server rule 5: where single use matters, the "
                      "server MUST enforce it server-side (the checker cannot know if it does: "
                      "a re-run seen by --effects-probe is a WARN).", True),
    "transport.headers": ("MUST", _S + "transports/streamable-http: a server that processes the "
                          "body MUST compare headers with the body; a missing required header "
                          "or a mismatch gives 400 + -32020 (a server that also serves "
                          "pre-2025-06-18 clients MAY treat a missing MCP-Protocol-Version as "
                          "2025-03-26).", True),
    "transport.origin": ("MUST", _S + "transports/streamable-http: servers MUST validate "
                         "Origin; a present but invalid one gives 403 (the Host check is a "
                         "SHOULD: WARN).", False),
    "transport.sse-buffering": ("SHOULD", _S + "transports/streamable-http: the server SHOULD "
                                "send `X-Accel-Buffering: no`.", True),
    "transport.body-limit": ("ADVICE", "no spec sentence: reference-implementation practice "
                             "(mrtr, SDKs and proxies cap request bodies).", False),
    "transport.get": ("SHOULD", _S + "transports/streamable-http: a server that speaks only "
                      "this revision SHOULD answer GET and DELETE with 405.", True),
    "dual-era.initialize": ("SHOULD", _S + "basic/versioning: a modern-only server SHOULD name "
                            "its supported versions in any error it returns to `initialize`.",
                            False),
    "client-profile": ("ADVICE", "client behaviour recorded in the profile's evidence, not a "
                       "spec sentence.", False),
}

RULES: tuple[Rule, ...] = tuple(
    replace(r, level=_SPEC[r.id][0], cite=_SPEC[r.id][1], modern=_SPEC[r.id][2])
    for r in _CATALOGUE)

_BY_ID = {r.id: r for r in RULES}


def rule(rule_id: str) -> Rule:
    """The rule with this id (KeyError for an unknown id)."""
    return _BY_ID[rule_id]
