"""The steps a sans-I/O flow yields (Send, Fulfil, Sleep) and the requests a flow may send."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

from mrtr.protocol import (
    CallToolRequest,
    CancelTaskRequest,
    GetPromptRequest,
    GetTaskRequest,
    InputRequest,
    ReadResourceRequest,
    UpdateTaskRequest,
)

__all__ = ["FlowRequest", "Fulfil", "Send", "Sleep", "Step", "TaskRequest"]

FlowRequest: TypeAlias = CallToolRequest | GetPromptRequest | ReadResourceRequest
TaskRequest: TypeAlias = GetTaskRequest | UpdateTaskRequest | CancelTaskRequest


@dataclass(frozen=True, slots=True)
class Send:
    """Send `request` and reply with the decoded result Struct."""

    request: FlowRequest | TaskRequest


@dataclass(frozen=True, slots=True)
class Fulfil:
    """Answer every input request of round `round` (1-based); reply with {key: response}."""

    input_requests: Mapping[str, InputRequest]
    round: int


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait `seconds` (before a state-only retry or the next task poll); reply with None."""

    seconds: float


Step: TypeAlias = Send | Fulfil | Sleep
