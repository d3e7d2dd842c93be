"""Input handlers (elicitation, sampling, roots), the capabilities they declare, and fulfilment."""

# Design: capabilities are derived from the handlers given and nothing else, so the client never
# declares what it cannot do. An input request for an undeclared capability fails the whole
# call locally before any handler runs: MRTR has no per-input error channel.
from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from mrtr.protocol import (
    UNSET,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    InputRequest,
    InputResponse,
    ListRootsResult,
    Root,
)

from ._errors import InputRefused

__all__ = [
    "ElicitationHandler",
    "Handlers",
    "RootsHandler",
    "RoundHook",
    "SamplingHandler",
    "fulfil",
]


class ElicitationHandler(Protocol):
    """Ask the user; `params.mode` is "url" for URL mode, absent or "form" for a form."""

    async def __call__(self, params: ElicitRequestParams, /) -> ElicitResult: ...


class SamplingHandler(Protocol):
    """Sample the client's model; must respect `params.max_tokens`."""

    async def __call__(self, params: CreateMessageRequestParams, /) -> CreateMessageResult: ...


class RootsHandler(Protocol):
    """Return the `file://` roots the user allows this server to see."""

    async def __call__(self) -> Sequence[Root]: ...


class RoundHook(Protocol):
    """Inspect a round before it is fulfilled; return False to abort the call (InputRefused)."""

    def __call__(
        self, round_no: int, input_requests: Mapping[str, InputRequest], /
    ) -> bool | None | Awaitable[bool | None]: ...


@dataclass(frozen=True, kw_only=True)
class Handlers:
    """What the client can answer; the declared capabilities follow from it exactly.

    `elicitation` serves form mode (unless `form=False`) and URL mode when `url=True`;
    `sampling_tools=True` also declares `sampling.tools`; `roots` is a handler or a fixed list.
    """

    elicitation: ElicitationHandler | None = None
    form: bool = True
    url: bool = False
    sampling: SamplingHandler | None = None
    sampling_tools: bool = False
    roots: RootsHandler | Sequence[Root] | None = None
    on_round: RoundHook | None = None

    def capabilities(self) -> ClientCapabilities:
        """The `clientCapabilities` to stamp on every request (`{}` with no handlers)."""
        elicitation: dict[str, object] = {}
        if self.elicitation is not None:
            elicitation = {m: {} for m, on in (("form", self.form), ("url", self.url)) if on}
        sampling: dict[str, object] = {"tools": {}} if self.sampling_tools else {}
        return ClientCapabilities(
            elicitation=elicitation if elicitation else UNSET,
            sampling=sampling if self.sampling is not None else UNSET,
            roots={} if self.roots is not None else UNSET,
        )


async def fulfil(
    handlers: Handlers, input_requests: Mapping[str, InputRequest], round_no: int
) -> dict[str, InputResponse]:
    """Answer every input request of one round concurrently.

    Raises InputRefused when a request needs an undeclared capability or `on_round` refuses.
    """
    for key, request in input_requests.items():
        problem = _refusal(handlers, request)
        if problem is not None:
            raise InputRefused(f"input request {key!r}: {problem}")
    if handlers.on_round is not None:
        verdict = handlers.on_round(round_no, input_requests)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is False:
            raise InputRefused(f"round {round_no} was refused by on_round")
    keys = list(input_requests)
    answers = await asyncio.gather(*(_answer(handlers, input_requests[k]) for k in keys))
    return dict(zip(keys, answers, strict=True))


def _refusal(handlers: Handlers, request: InputRequest) -> str | None:
    """Why `request` cannot be answered with these handlers, or None."""
    if isinstance(request, ElicitRequest):
        if handlers.elicitation is None:
            return "elicitation was not declared"
        if request.params.mode == "url":
            return None if handlers.url else "URL elicitation was not declared"
        return None if handlers.form else "form elicitation was not declared"
    if isinstance(request, CreateMessageRequest):
        if handlers.sampling is None:
            return "sampling was not declared"
        params = request.params
        wants_tools = params.tools is not UNSET or params.tool_choice is not UNSET
        if wants_tools and not handlers.sampling_tools:
            return "sampling with tools was not declared"
        return None
    return None if handlers.roots is not None else "roots were not declared"


async def _answer(handlers: Handlers, request: InputRequest) -> InputResponse:
    if isinstance(request, ElicitRequest):
        assert handlers.elicitation is not None
        return await handlers.elicitation(request.params)
    if isinstance(request, CreateMessageRequest):
        assert handlers.sampling is not None
        return await handlers.sampling(request.params)
    roots = handlers.roots
    assert roots is not None
    found = await roots() if callable(roots) else roots
    return ListRootsResult(roots=list(found))
