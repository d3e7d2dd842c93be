"""ClientLimits: input requests per round and per flow, pages and items per list walk (#11)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Generator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr.client import (
    ClientLimits,
    Fulfil,
    Handlers,
    InputRefused,
    ListTooLong,
    Send,
    Step,
    TooManyInputs,
    call_flow,
)
from mrtr.protocol import (
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    RequestMeta,
    TextContent,
)

from .mocks import JSONDict, MockServer, Reply, client_for, ok

ASK = ElicitRequest(params=ElicitRequestFormParams(message="ok?", requested_schema={
    "type": "object", "properties": {"ok": {"type": "boolean"}}}))
SAMPLE = {"method": "sampling/createMessage", "params": {
    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}}


def meta() -> RequestMeta:
    return RequestMeta(protocol_version="2026-07-28", client_capabilities=ClientCapabilities())


def flow(limits: ClientLimits | None) -> Generator[Step, object, CallToolResult]:
    ids = itertools.count(1)
    request = CallToolRequest(id=0, params=CallToolRequestParams(name="t", meta=meta()))
    return call_flow(request, CallToolResult, new_id=lambda: next(ids), new_meta=meta,
                     max_rounds=100, limits=limits)


def rounds_answered(
    sizes: list[int], limits: ClientLimits | None
) -> tuple[int, TooManyInputs | None]:
    """Rounds of `sizes` input requests: how many reached Fulfil, and the error if any."""
    gen = flow(limits)
    answered = 0
    replies = iter([InputRequiredResult(input_requests={f"k{i}": ASK for i in range(n)},
                                        request_state="s") for n in sizes])
    try:
        step = next(gen)
        while True:
            if isinstance(step, Send):
                step = gen.send(next(replies, CallToolResult(content=[])))
            else:
                assert isinstance(step, Fulfil)
                answered += 1
                step = gen.send({k: ElicitResult(action="decline") for k in step.input_requests})
    except StopIteration:
        return answered, None
    except TooManyInputs as exc:
        return answered, exc


def test_defaults_cap_a_round_and_a_flow() -> None:
    assert rounds_answered([16], None) == (1, None)
    answered, error = rounds_answered([17], None)
    assert answered == 0 and isinstance(error, InputRefused)
    assert str(error) == "the server asked 17 input requests in one round (max_round_inputs=16)"
    assert rounds_answered([16, 16, 16, 16], None) == (4, None)
    answered, error = rounds_answered([16, 16, 16, 16, 1], None)
    assert answered == 4
    assert str(error) == "the server asked 65 input requests in this call (max_flow_inputs=64)"


@given(st.lists(st.integers(min_value=1, max_value=6), max_size=8),
       st.integers(min_value=1, max_value=6), st.integers(min_value=1, max_value=20))
def test_no_round_over_the_limits_reaches_a_handler(
    sizes: list[int], per_round: int, per_flow: int
) -> None:
    limits = ClientLimits(max_round_inputs=per_round, max_flow_inputs=per_flow)
    totals = itertools.accumulate(sizes)
    breach = next((i for i, (n, total) in enumerate(zip(sizes, totals, strict=True))
                   if n > per_round or total > per_flow), None)
    answered, error = rounds_answered(sizes, limits)
    if breach is None:
        assert (answered, error) == (len(sizes), None)
    else:  # the rounds before the breach were answered, the breaching one was not
        assert answered == breach and isinstance(error, TooManyInputs)


# -- through the Client: no sampling handler runs past the caps -------------------------------

def many_samples(request: JSONDict, headers: dict[str, str]) -> Reply:
    """Every round asks for 10 more samples, forever."""
    if request["method"] == "tools/list":
        return ok(request, {"tools": []})
    round_no = int(request["params"].get("requestState", 0))
    asks = {f"s{round_no}-{i}": SAMPLE for i in range(10)}
    return ok(request, {"resultType": "input_required", "inputRequests": asks,
                        "requestState": str(round_no + 1)})


def test_sampling_spend_is_capped_per_call() -> None:
    calls: list[str] = []

    async def sample(params: CreateMessageRequestParams) -> CreateMessageResult:
        calls.append("sampled")
        return CreateMessageResult(role="assistant", content=TextContent(text="x"), model="m")

    async def go(limits: ClientLimits | None) -> None:
        async with client_for(MockServer(many_samples), Handlers(sampling=sample),
                              limits=limits) as client:
            await client.call_tool("spend", {})

    with pytest.raises(TooManyInputs, match=r"70 input requests in this call \(max_flow_inp"):
        asyncio.run(go(None))
    assert len(calls) == 60  # six rounds of ten; the seventh was refused before any handler
    calls.clear()
    with pytest.raises(TooManyInputs, match=r"10 input requests in one round \(max_round_inputs=4"):
        asyncio.run(go(ClientLimits(max_round_inputs=4)))
    assert calls == []


def test_manual_flow_has_the_caps() -> None:
    async def go() -> None:
        async with client_for(MockServer(many_samples), limits=ClientLimits(
                max_round_inputs=5)) as client:
            await client.start_tool_call("spend", {}).step()

    with pytest.raises(TooManyInputs):
        asyncio.run(go())


# -- list walks ----------------------------------------------------------------------------------

def pages_of(count: int, per_page: int) -> MockServer:
    def handle(request: JSONDict, headers: dict[str, str]) -> Reply:
        page = int(request["params"].get("cursor") or 0)
        result: JSONDict = {"prompts": [{"name": f"p{page}-{i}"} for i in range(per_page)]}
        if page + 1 < count:
            result["nextCursor"] = str(page + 1)
        return ok(request, result)

    return MockServer(handle)


def list_prompts(app: MockServer, limits: ClientLimits | None = None) -> int:
    async def go() -> int:
        async with client_for(app, limits=limits) as client:
            return len(await client.list_prompts())

    return asyncio.run(go())


def test_lists_up_to_the_limits_are_read_whole() -> None:
    assert list_prompts(pages_of(100, 1)) == 100
    assert list_prompts(pages_of(3, 2), ClientLimits(max_pages=3, max_items=6)) == 6


def test_lists_past_the_limits_raise() -> None:
    app = pages_of(101, 1)
    with pytest.raises(ListTooLong, match=r"^prompts/list: still a nextCursor after 100 pages"):
        list_prompts(app)
    assert len(app.bodies("prompts/list")) == 100
    with pytest.raises(ListTooLong, match=r"^prompts/list: 3 pages and 6 items "
                                          r"\(limits: max_pages=100, max_items=5\)$"):
        list_prompts(pages_of(3, 2), ClientLimits(max_items=5))
