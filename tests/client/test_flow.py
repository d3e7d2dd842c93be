"""The sans-I/O MRTR flow, driven by hand: no I/O, no event loop."""

from __future__ import annotations

import itertools
from collections.abc import Generator

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr.client import (
    Fulfil,
    InputRefused,
    Send,
    Sleep,
    Step,
    Suspended,
    TooManyRounds,
    UnexpectedResult,
    call_flow,
)
from mrtr.protocol import (
    RETRY_AFTER_KEY,
    UNSET,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    RequestMeta,
    TextContent,
)

DONE = CallToolResult(content=[TextContent(text="done")])
ASK = ElicitRequest(params=ElicitRequestFormParams(message="ok?", requested_schema={
    "type": "object", "properties": {"ok": {"type": "boolean"}}}))


def meta_factory() -> RequestMeta:
    return RequestMeta(protocol_version="2026-07-28", client_capabilities=ClientCapabilities())


def original() -> CallToolRequest:
    return CallToolRequest(id=0, params=CallToolRequestParams(
        name="book", arguments={"n": 1, "s": "x"}, meta=meta_factory()))


def flow(max_rounds: int = 10, resume: Suspended | None = None) -> Generator[
        Step, object, CallToolResult]:
    ids = itertools.count(1)
    return call_flow(original(), CallToolResult, new_id=lambda: next(ids),
                     new_meta=meta_factory, max_rounds=max_rounds, resume=resume)


def answers_for(step: Fulfil) -> dict[str, ElicitResult]:
    return {k: ElicitResult(action="accept", content={"ok": True, "round": step.round})
            for k in step.input_requests}


def run(replies: list[object], max_rounds: int = 10) -> tuple[list[CallToolRequest], object]:
    """Feed `replies` to a flow; return the requests it sent and its outcome."""
    sent: list[CallToolRequest] = []
    gen = flow(max_rounds)
    feed = iter(replies)
    try:
        step = next(gen)
        while True:
            if isinstance(step, Send):
                assert isinstance(step.request, CallToolRequest)
                sent.append(step.request)
                step = gen.send(next(feed))
            elif isinstance(step, Fulfil):
                step = gen.send(answers_for(step))
            else:
                step = gen.send(None)
    except StopIteration as stop:
        return sent, stop.value
    except (TooManyRounds, UnexpectedResult) as exc:
        return sent, exc


input_required = st.builds(
    lambda keys, state: InputRequiredResult(
        input_requests={k: ASK for k in keys} if keys else UNSET,
        request_state=state if state is not None else (UNSET if keys else "s"),
    ),
    st.lists(st.text(min_size=1, max_size=5), max_size=3, unique=True),
    st.one_of(st.none(), st.text(max_size=20)),
)


@given(st.lists(input_required, max_size=14), st.integers(min_value=0, max_value=12))
def test_retries_follow_the_rules(rounds: list[InputRequiredResult], cap: int) -> None:
    sent, outcome = run([*rounds, DONE], max_rounds=cap)
    ids = [r.id for r in sent]
    assert len(set(ids)) == len(ids)
    assert len(sent) <= cap + 1
    if len(rounds) > cap:
        assert isinstance(outcome, TooManyRounds)
    else:
        assert outcome == DONE and len(sent) == len(rounds) + 1
    first = sent[0].params
    assert first.input_responses is UNSET and first.request_state is UNSET
    for reply, retry in zip(rounds, sent[1:], strict=False):
        params = retry.params
        assert (params.name, params.arguments) == ("book", {"n": 1, "s": "x"})
        assert params.request_state == reply.request_state  # byte-exact, or absent when absent
        asked = reply.input_requests if reply.input_requests is not UNSET else {}
        if asked:
            assert set(params.input_responses or {}) == set(asked)
        else:
            assert params.input_responses is UNSET


def test_state_only_reply_sleeps_then_retries() -> None:
    gen = flow()
    assert isinstance(next(gen), Send)
    assert isinstance(gen.send(InputRequiredResult(request_state="abc")), Sleep)
    step = gen.send(None)
    assert isinstance(step, Send) and step.request.params.request_state == "abc"


def test_not_yet_rounds_wait_the_hint_and_do_not_count_against_max_rounds() -> None:
    gen = flow(max_rounds=2)
    next(gen)
    for n in range(5):  # a URL elicitation not completed yet: 5 waits with max_rounds=2
        step = gen.send(InputRequiredResult(request_state=f"s{n}",
                                            meta={RETRY_AFTER_KEY: 1500}))
        assert isinstance(step, Sleep) and step.seconds == 1.5
        sent = gen.send(None)
        assert isinstance(sent, Send) and sent.request.params.request_state == f"s{n}"
        assert sent.request.params.input_responses is UNSET
    step = gen.send(InputRequiredResult(request_state="x", meta={RETRY_AFTER_KEY: 10**9}))
    assert isinstance(step, Sleep) and step.seconds == 30.0  # clamped
    gen.send(None)
    with pytest.raises(StopIteration) as stop:
        gen.send(DONE)
    assert stop.value.value == DONE


def test_answers_only_for_the_latest_round() -> None:
    gen = flow()
    next(gen)
    gen.send(InputRequiredResult(input_requests={"a": ASK}, request_state="1"))
    step = gen.send({"a": ElicitResult(action="accept", content={"ok": True})})
    assert isinstance(step, Send)
    gen.send(InputRequiredResult(input_requests={"b": ASK}))
    step = gen.send({"b": ElicitResult(action="decline"), "zzz": ElicitResult(action="cancel")})
    assert isinstance(step, Send)
    assert step.request.params.input_responses == {"b": {"action": "decline"}}
    assert step.request.params.request_state is UNSET


def test_missing_answer_refuses() -> None:
    gen = flow()
    next(gen)
    gen.send(InputRequiredResult(input_requests={"a": ASK, "b": ASK}))
    with pytest.raises(InputRefused, match="b"):
        gen.send({"a": ElicitResult(action="decline")})


def test_empty_input_required_is_unexpected() -> None:
    gen = flow()
    next(gen)
    with pytest.raises(UnexpectedResult):
        gen.send(InputRequiredResult())


def test_wrong_result_type_is_unexpected() -> None:
    gen = flow()
    next(gen)
    with pytest.raises(UnexpectedResult):
        gen.send(InputRequiredResult.__mro__[1]())  # a bare Result


def test_resume_starts_at_fulfil_and_counts_rounds() -> None:
    reply = InputRequiredResult(input_requests={"a": ASK}, request_state="st")
    gen = flow(max_rounds=3, resume=Suspended(reply=reply, round=3))
    step = next(gen)
    assert isinstance(step, Fulfil) and step.round == 3
    step = gen.send({"a": ElicitResult(action="accept", content={"ok": True})})
    assert isinstance(step, Send) and step.request.params.request_state == "st"
    with pytest.raises(TooManyRounds):
        gen.send(reply)


def test_retry_encodes_camel_case() -> None:
    gen = flow()
    next(gen)
    gen.send(InputRequiredResult(input_requests={"a": ASK}, request_state="S"))
    step = gen.send({"a": ElicitResult(action="accept", content={"ok": True})})
    assert isinstance(step, Send)
    wire = msgspec.json.decode(msgspec.json.encode(step.request))
    assert wire["params"]["inputResponses"] == {"a": {"action": "accept", "content": {"ok": True}}}
    assert wire["params"]["requestState"] == "S"
