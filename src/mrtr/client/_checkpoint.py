"""A suspended flow as a JSON string, to resume it later or in another process."""

# Design: the checkpoint holds exactly what `call_flow` needs to continue: the original request
# (retries are rebuilt from it), the pending input requests, the opaque requestState (kept as the
# decoded string, so it is echoed unchanged) and the round number. Ids and `_meta` are fresh on
# resume, so nothing in it ties the flow to the process that started it. Once the server made the
# call a task, the checkpoint also holds the task id and the keys already answered, and resuming
# it polls that task (the MRTR phase is over: there is no way back from a task to MRTR).
from __future__ import annotations

from typing import Literal

import msgspec

from mrtr.protocol import (
    METHODS,
    UNSET,
    InputRequest,
    InputRequiredResult,
    UnsetType,
    decode,
    encode_message,
)

from ._errors import ClientError
from ._flow import FlowRequest, Suspended

__all__ = ["dump_checkpoint", "load_checkpoint"]

_RESUMABLE = frozenset({"tools/call", "prompts/get", "resources/read"})


class _Checkpoint(msgspec.Struct, rename="camel", kw_only=True, frozen=True):
    format: Literal["mrtr-flow/1"] = "mrtr-flow/1"
    method: str
    request: msgspec.Raw
    input_requests: dict[str, InputRequest] = {}
    request_state: str | UnsetType = UNSET
    round: int
    task_id: str | UnsetType = UNSET
    answered: list[str] = []


def dump_checkpoint(original: FlowRequest, suspended: Suspended) -> str:
    """Serialize a flow suspended for input into a JSON string."""
    reply = suspended.reply
    checkpoint = _Checkpoint(
        method=original.method,
        request=msgspec.Raw(encode_message(original)),
        input_requests=dict(reply.input_requests) if reply.input_requests is not UNSET else {},
        request_state=reply.request_state,
        round=suspended.round,
        task_id=UNSET if suspended.task_id is None else suspended.task_id,
        answered=sorted(suspended.answered),
    )
    return msgspec.json.encode(checkpoint).decode("utf-8")


def load_checkpoint(text: str | bytes) -> tuple[FlowRequest, Suspended]:
    """Parse a checkpoint back into the original request and where the flow stopped.

    Raises ClientError when the text is not a valid checkpoint.
    """
    try:
        checkpoint = decode(text, _Checkpoint)
        if checkpoint.method not in _RESUMABLE:
            raise ValueError(f"method {checkpoint.method!r} cannot be resumed")
        request = decode(bytes(checkpoint.request), METHODS[checkpoint.method].request_type)
    except (msgspec.DecodeError, ValueError) as exc:
        raise ClientError(f"invalid checkpoint: {exc}") from None
    assert isinstance(request, FlowRequest)
    reply = InputRequiredResult(
        input_requests=checkpoint.input_requests or UNSET,
        request_state=checkpoint.request_state,
    )
    task_id = None if checkpoint.task_id is UNSET else checkpoint.task_id
    return request, Suspended(reply=reply, round=checkpoint.round, task_id=task_id,
                              answered=frozenset(checkpoint.answered))
