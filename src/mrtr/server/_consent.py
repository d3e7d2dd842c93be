"""Consent through the model: a sealed, single-use confirmation token for `ctx.confirm` when the
client cannot render the question (no `elicitation`, or an operator says it does not)."""

# Design: a client without elicitation (claude.ai in 2026) used to get -32021 for a tool that
# confirms; such tools were hidden or confirmed nothing. Here the round ends with a plain tool
# result that states the question and a token, and asks the model to put the question to the
# user and, if they agree, call the same tool again with `_confirm: <token>`. The token is sealed
# (AES-GCM, audience "<server>/consent"), bound to the tool, a digest of the arguments (without
# `_confirm`), the principal and the question digests it grants, lives `ttl` seconds, and is
# redeemed once through the store (put_if_absent on its nonce: one winner across replicas). It
# is redeemed before the handler runs (Runner), so a refused token runs nothing; the grant then
# answers the confirm whose question it names, as if the user had accepted in a form. Why this
# is safe: the model can only replay what the server sealed for this caller and these arguments;
# it cannot widen the action (other arguments fail the digest), borrow another user's consent
# (principal), or use one yes twice (store). It cannot stop a model that lies about having asked
# the user: the token proves the server stated the action, not that a human read it; servers
# that need the human use native elicitation (mode "native"). Decisions are logged once each
# (`mrtr.consent`) and set the `mrtr.consent` span attribute. Clients that render the form pay
# nothing: the gate is consulted only when a confirm is emitted or answered.
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from mrtr.errors import InvalidRequestState, MrtrError
from mrtr.protocol import CallToolResult, Implementation, TextContent
from mrtr.server._asks import Ask
from mrtr.server._capabilities import capability_missing
from mrtr.server._probe import current_probe
from mrtr.server._sealing import Binding, Sealer, digest_arguments
from mrtr.stores import ClaimStatus, MemoryStore

if TYPE_CHECKING:
    from mrtr.stores import Store

__all__ = [
    "CONFIRM_ARGUMENT",
    "CONSENT_LOGGER",
    "ConsentGate",
    "ConsentMode",
    "ConsentPolicy",
    "ConsentRefused",
    "ConsentRequired",
    "NATIVE",
    "Grant",
    "consent_schema",
    "split_confirm",
    "tool_consent",
]

CONFIRM_ARGUMENT = "_confirm"
CONSENT_LOGGER = "mrtr.consent"
ConsentMode = Literal["native", "auto", "token"]
_MODES = ("native", "auto", "token")
_METHOD = "consent/confirm"  # the Binding's method: a token never unseals as a requestState
NATIVE: Any = object()  # decide(): ask natively (or -32021), the token path does not apply
_DESCRIPTION = ("Leave out. Only when a previous call of this tool answered with a confirmation "
                "token and the user agreed: that token, with the same other arguments.")


class ConsentRefused(MrtrError):
    """A `_confirm` token that does not fit this call: used, expired, or made for another."""


class ConsentRequired(BaseException):  # noqa: N818 - control flow, like Suspend
    """The round ends with `result`: the question and a token for the model (never escapes the
    Runner). A BaseException so that a handler's `except Exception` cannot swallow it."""

    def __init__(self, result: CallToolResult) -> None:
        super().__init__("consent needed")
        self.result = result


class _Body(msgspec.Struct, array_like=True, frozen=True):
    n: str  # nonce: the store key that makes the token single-use
    q: list[str]  # the question shapes this token grants (earlier confirms of the run too)
    f: str = ""  # the flow id of the call that minted it (for the log)


class ConsentPolicy:
    """The operator's override: clients that declare elicitation but do not render it.

    `ignore_elicitation` names clients by `clientInfo.name`, or `name/version` (that version,
    or a version starting with it followed by "."): `["claude-ai", "acme-desktop/1.4"]`.
    """

    def __init__(self, *, ignore_elicitation: Iterable[str] = ()) -> None:
        self.ignore_elicitation = tuple(ignore_elicitation)
        self._names: dict[str, list[str]] = {}
        for entry in self.ignore_elicitation:
            name, _, version = entry.partition("/")
            self._names.setdefault(name, []).append(version)

    @classmethod
    def from_file(cls, path: str | Path) -> ConsentPolicy:
        """Read `ignore_elicitation = [...]` from a TOML file, or the same key from JSON."""
        import tomllib  # here: a policy file is read once, at start-up, and rarely at all

        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text) if str(path).endswith(".json") else tomllib.loads(text)
        names = data.get("ignore_elicitation", [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"{path}: ignore_elicitation must be a list of strings")
        return cls(ignore_elicitation=names)

    def ignores(self, info: object) -> bool:
        """True when the client `info` (an Implementation or its dict) is named by the policy."""
        if isinstance(info, Implementation):
            name, version = info.name, info.version
        elif isinstance(info, Mapping):
            name, version = str(info.get("name", "")), str(info.get("version", ""))
        else:
            return False
        for wanted in self._names.get(name, ()):
            if not wanted or version == wanted or version.startswith(wanted + "."):
                return True
        return False

    def __repr__(self) -> str:
        return f"ConsentPolicy(ignore_elicitation={list(self.ignore_elicitation)!r})"


def tool_consent(consent: str | None, destructive: object) -> str:
    """A tool's default mode: `consent` as given, else "auto" for destructive tools."""
    if consent is None:
        return "auto" if destructive is True else "native"
    if consent not in _MODES:
        raise ValueError(f"consent must be one of {', '.join(_MODES)}, not {consent!r}")
    return consent


def consent_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The advertised input schema of a tool with the token path: `_confirm` added."""
    properties = dict(schema.get("properties", {}))
    properties[CONFIRM_ARGUMENT] = {"type": "string", "description": _DESCRIPTION}
    return {**schema, "properties": properties}


def split_confirm(arguments: Mapping[str, Any]) -> tuple[dict[str, Any], object]:
    """The arguments without `_confirm`, and its value."""
    rest = {k: v for k, v in arguments.items() if k != CONFIRM_ARGUMENT}
    return rest, arguments[CONFIRM_ARGUMENT]


class Grant(msgspec.Struct, frozen=True):
    """A redeemed token: the question shapes it answers yes to, and its id for the log."""

    shapes: frozenset[str]
    consent_id: str
    flow_id: str = ""


_REFUSED = ("The confirmation token does not fit this call: it was made for other arguments, "
            "another tool or another user, or it has expired. Nothing was done. Call the tool "
            "without `_confirm` to get a new question for the user.")
_USED = ("The confirmation token was used already; each one works once. Nothing was done. "
         "Call the tool without `_confirm` to get a new question for the user.")


class ConsentGate:
    """Mints and redeems confirmation tokens, and logs every consent decision (one per Dispatcher).

    `store` makes a token single-use across every process sharing it; None: this process only.
    """

    def __init__(self, sealer: Sealer, store: Store | None, policy: ConsentPolicy | None, *,
                 audience: str, ttl: float = 300.0,
                 logger: logging.Logger | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        self.ttl = ttl
        self._wall = wall
        self.policy = policy
        self._sealer = sealer.for_audience(audience, ttl=ttl, flow_ttl=ttl)
        self._store: Store = store if store is not None else MemoryStore()
        self.log = logger if logger is not None else logging.getLogger(CONSENT_LOGGER)

    # -- the handler reached a confirm ---------------------------------------------------------
    def decide(self, ask: Ask[Any], default: str, capabilities: object, client_info: object,
               grant: Grant | None, bind: Callable[[], Binding],
               named_flow: Callable[[], str]) -> Any:
        """NATIVE (ask in a form), True (a redeemed token says yes), or raise ConsentRequired.

        `bind` and `named_flow` (the flow's id) are called only on the token path."""
        mode = ask.consent if ask.consent in _MODES else default
        if mode == "native":
            return NATIVE
        lacks = capability_missing(capabilities, ask.spec.capability)
        overridden = (not lacks and self.policy is not None
                      and self.policy.ignores(client_info))
        if mode == "auto" and not lacks and not overridden:
            return NATIVE
        binding, shape, flow_id = bind(), ask.spec.shape, named_flow()
        if grant is not None and shape in grant.shapes:
            self.decided("override" if overridden else "token", binding.target,
                         binding.principal, shape, grant.flow_id or flow_id, grant.consent_id)
            return True
        shapes = (grant.shapes if grant is not None else frozenset()) | {shape}
        raise ConsentRequired(self._question(ask, binding, shapes, flow_id))

    def _question(self, ask: Ask[Any], binding: Binding, shapes: frozenset[str],
                  flow_id: str) -> CallToolResult:
        body = _Body(os.urandom(12).hex(), sorted(shapes), flow_id)
        bound = msgspec.structs.replace(binding, method=_METHOD)  # never a requestState
        token = self._sealer.seal(msgspec.msgpack.encode(body), bound)
        tool = binding.target
        params = getattr(ask.request, "params", None)
        question = getattr(params, "message", "")
        minutes = max(1, round(self.ttl / 60))
        text = (f"Nothing has been done yet: `{tool}` needs the user's confirmation first.\n"
                f"Question for the user: {question}\n"
                f"Ask the user exactly this. Only if they agree, call `{tool}` again with the "
                f"same arguments plus \"{CONFIRM_ARGUMENT}\": \"{token}\". The token works once, "
                f"for these arguments and this user, for {minutes} minute(s). If they do not "
                "agree, do not call it again.")
        meta = {"io.github.mrtr/consent": {"argument": CONFIRM_ARGUMENT, "token": token,
                                           "question": question, "expiresIn": self.ttl}}
        return CallToolResult(content=[TextContent(text=text)], meta=meta)

    # -- a call presented a token ----------------------------------------------------------------
    async def redeem(self, token: object, tool: str, arguments: Mapping[str, Any],
                     principal: str | None) -> Grant:
        """The Grant of `token` for this call, used up; raises ConsentRefused (nothing runs)."""
        binding = Binding(method=_METHOD, target=tool, arguments_digest=digest_arguments(arguments),
                          principal=principal)
        try:
            if not isinstance(token, str):
                raise InvalidRequestState("not a string")
            unsealed = self._sealer.unseal(token, binding)
            body = msgspec.msgpack.decode(unsealed.body, type=_Body)
        except (InvalidRequestState, msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.decided("refused", tool, principal, "-", "", "-")
            raise ConsentRefused(_REFUSED) from exc
        # Kept past the token's life by either clock (the store's may not be the Sealer's):
        # after that the Sealer refuses the token anyway.
        expires = max(unsealed.deadline, self._wall() + self.ttl) + 60.0
        claim = await self._store.put_if_absent(f"consent:{body.n}", b"used", expires=expires)
        if claim.status is not ClaimStatus.NEW:
            self.decided("refused", tool, principal, ",".join(body.q), body.f, body.n)
            raise ConsentRefused(_USED)
        return Grant(frozenset(body.q), body.n, body.f)

    # -- the audit line --------------------------------------------------------------------------
    def decided(self, how: str, tool: str, principal: str | None, question: str, flow_id: str,
                consent_id: str = "-") -> None:
        """One `mrtr.consent` line (and span attribute) for a decision: form, token, override,
        declined or refused."""
        probe = current_probe()
        if probe is not None and not probe.flow_id:  # a redemption continues the minting flow
            probe.flow_id = flow_id  # (and the log's request context takes it from the probe)
        if self.log.isEnabledFor(logging.INFO):
            digest = (hashlib.sha256(principal.encode()).hexdigest()[:16]
                      if principal is not None else "-")
            fields = {"consent": how, "tool": tool, "principal": digest, "question": question,
                      "flow_id": flow_id or "-", "consent_id": consent_id}
            self.log.info("consent for %s: %s", tool if tool.isprintable() else repr(tool),
                          how, extra=fields)
        span = probe.span if probe is not None else None
        if span is not None:
            setter = getattr(span, "set_attribute", None)
            if setter is not None:
                setter("mrtr.consent", how)


