"""serve(): the key and host plumbing handed to worker processes, without starting uvicorn."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mrtr.server import Binding, Sealer, generate_key, parse_keys
from mrtr.transports import _serve
from mrtr.transports._hosts import HostCheck

PROBE = Binding(method="tools/call", target="greet", arguments_digest=b"", principal=None)
ENV = ("MRTR_STATE_KEYS", "MRTR_SERVE_TARGET", "MRTR_SERVE_PATH", "MRTR_SERVE_ALLOWED_HOSTS",
       "MRTR_SERVE_EXPOSE_WORKER")


@pytest.fixture
def uvicorn_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Record what serve() would hand to uvicorn instead of starting it."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)  # restored afterwards: serve() writes them
    runs: list[dict[str, Any]] = []

    def fake(app: object, **options: Any) -> int:
        runs.append({"app": app, **options})
        return 0

    monkeypatch.setattr(_serve, "_run_uvicorn", fake)
    yield runs


def opens(sealer: Sealer, keys: str) -> bool:
    """Whether a state sealed by `sealer` opens with the key ring `keys`."""
    ring = Sealer(keys=parse_keys(keys), audience="transport-tests")
    try:
        ring.unseal(sealer.seal(b"x", PROBE), PROBE)
    except Exception:
        return False
    return True


@pytest.mark.parametrize("target", ["tests.transports.apps:app",
                                    "tests.transports.apps:dispatcher"])
def test_workers_keep_mrtr_state_keys_issue_20(
    uvicorn_runs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    key = generate_key()
    monkeypatch.setenv("MRTR_STATE_KEYS", key)
    assert _serve.serve(target, workers=2, port=9) == 0
    assert uvicorn_runs[0]["workers"] == 2
    assert _serve.os.environ["MRTR_STATE_KEYS"] == parse_keys(key)[0].hex()
    worker = _serve._worker_app()  # what each worker process builds
    assert opens(worker.dispatcher.sealer, key)


def test_workers_without_keys_share_one_generated_key(
    uvicorn_runs: list[dict[str, Any]],
) -> None:
    assert _serve.serve("tests.transports.apps:dispatcher", workers=3, port=9) == 0
    shared = _serve.os.environ["MRTR_STATE_KEYS"]
    one, two = _serve._worker_app(), _serve._worker_app()
    assert opens(one.dispatcher.sealer, shared)
    assert opens(two.dispatcher.sealer, shared)


@pytest.mark.parametrize(("host", "extra", "accepted", "refused"), [
    ("127.0.0.1", [], ["127.0.0.1:8080", "localhost", "[::1]:1"], ["example.com:8000"]),
    ("0.0.0.0", ["mcp.example.com"], ["mcp.example.com", "mcp.example.com:443", "localhost:9"],
     ["0.0.0.0:8000", "evil.example.com"]),
    ("10.1.2.3", [], ["10.1.2.3:8000", "10.1.2.3"], ["10.1.2.4:8000"]),
])
def test_allowed_hosts_are_names_on_any_port_issue_11(
    host: str, extra: list[str], accepted: list[str], refused: list[str]
) -> None:
    check = HostCheck(_serve._allowed_hosts(host, extra))
    assert [h for h in accepted if not check.allowed(h)] == []
    assert [h for h in refused if check.allowed(h)] == []


def test_single_process_app_gets_the_allow_list(uvicorn_runs: list[dict[str, Any]]) -> None:
    _serve.serve("tests.transports.apps:app", port=9, allowed_hosts=["mcp.example.com"])
    check = uvicorn_runs[0]["app"].hosts
    assert check.allowed("mcp.example.com") and check.allowed("localhost:5555")
