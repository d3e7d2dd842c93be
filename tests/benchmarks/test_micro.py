"""benchmarks.micro runs end to end; no timing assertions (numbers depend on the machine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.micro import main, round_body, sealed_round
from mrtr.protocol import CallToolRequest, decode_client_message


def test_micro_writes_positive_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "micro.json"
    assert main(["--number", "5", "--repeat", "2", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert set(record["us_per_op"]) == {"seal+unseal", "decode+encode round"}
    assert all(value > 0 for value in record["us_per_op"].values())
    printed = capsys.readouterr().out
    assert "seal+unseal" in printed and "target ≤ 10 µs" in printed


def test_inputs_are_a_real_round() -> None:
    sealer, body, binding = sealed_round()
    assert 80 <= len(body) <= 200
    state = sealer.seal(body, binding)
    assert sealer.unseal(state, binding).body == body
    message = decode_client_message(round_body(state))
    assert isinstance(message, CallToolRequest)
    assert message.params.request_state == state
    assert set(message.params.input_responses) == {"name"}  # type: ignore[arg-type]
