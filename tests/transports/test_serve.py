"""serve(): settings, keys, hosts and targets handed to uvicorn, without starting it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mrtr.http import McpApp
from mrtr.http._hosts import HostCheck
from mrtr.server import Binding, Dispatcher, Sealer, generate_key, parse_keys
from mrtr.serving import _serve
from mrtr.serving._keyfile import read_or_create_key
from tests.transports import apps

PROBE = Binding(method="tools/call", target="greet", arguments_digest=b"", principal=None)
ENV = ("MRTR_STATE_KEYS", "MRTR_SERVE_TARGET", "MRTR_SERVE_PATH", "MRTR_SERVE_ALLOWED_HOSTS",
       "MRTR_SERVE_EXPOSE_WORKER", "MRTR_SERVE_ASK_TIMEOUT")


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


def opened_by(app: object, key: bytes) -> bool:
    """Whether the McpApp `app` seals with `key`."""
    assert isinstance(app, McpApp)
    return opens(app.dispatcher.sealer, key.hex())


@pytest.mark.parametrize(("host", "workers", "used"), [
    ("127.0.0.1", 1, True),
    ("localhost", 1, True),
    ("::1", 1, True),
    ("0.0.0.0", 1, False),  # reachable from elsewhere: keys are a deployment decision
    ("10.1.2.3", 1, False),
    ("127.0.0.1", 2, False),  # workers share a key generated for the run
])
def test_19_only_a_single_local_process_uses_the_key_file(
    uvicorn_runs: list[dict[str, Any]], tmp_path: Path, host: str, workers: int, used: bool,
) -> None:
    key_file = tmp_path / "mrtr" / "requeststate.key"
    assert _serve.serve("tests.transports.apps:app", host=host, port=9, workers=workers,
                        key_file=key_file) == 0
    assert key_file.exists() is used
    if used:
        assert opened_by(uvicorn_runs[0]["app"], read_or_create_key(key_file))


def test_19_mrtr_state_keys_win_over_the_key_file(
    uvicorn_runs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key = generate_key()
    monkeypatch.setenv("MRTR_STATE_KEYS", key)
    _serve.serve("tests.transports.apps:app", port=9, key_file=tmp_path / "k" / "key")
    assert not (tmp_path / "k").exists()
    assert opened_by(uvicorn_runs[0]["app"], parse_keys(key)[0])


def test_19_an_unusable_key_file_falls_back_to_an_ephemeral_key(
    uvicorn_runs: list[dict[str, Any]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key_file = tmp_path / "mrtr" / "requeststate.key"
    key = read_or_create_key(key_file)
    key_file.chmod(0o640)
    with caplog.at_level(logging.WARNING, "mrtr.serve"):
        assert _serve.serve("tests.transports.apps:app", port=9, key_file=key_file) == 0
    assert not opened_by(uvicorn_runs[0]["app"], key)
    assert (f"cannot use the key file ({key_file} is open to other users (chmod 600 it, or "
            "delete it)): this run's requestState key is ephemeral") in caplog.messages


@pytest.mark.parametrize(("settings", "message"), [
    ({"port": 65536}, "port must be 0..65535 (0 picks a free port), got 65536"),
    ({"port": -1}, "port must be 0..65535 (0 picks a free port), got -1"),
    ({"workers": 0}, "workers must be at least 1, got 0"),
    ({"path": "mcp"}, "path must start with '/', got 'mcp'"),
])
def test_19_settings_are_checked_before_anything_starts(
    uvicorn_runs: list[dict[str, Any]], settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        _serve.serve("tests.transports.apps:app", **settings)
    assert str(caught.value) == message and uvicorn_runs == []


def test_19_an_mcpapp_target_is_served_with_the_run_keys(
    uvicorn_runs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = generate_key()
    monkeypatch.setenv("MRTR_STATE_KEYS", key)
    asgi = McpApp(Dispatcher(apps.app), path="/custom")
    monkeypatch.setattr(apps, "asgi", asgi, raising=False)
    _serve.serve("tests.transports.apps:asgi", port=9)
    assert uvicorn_runs[0]["app"] is asgi and uvicorn_runs[0]["path"] == "/custom"
    assert opened_by(asgi, parse_keys(key)[0])


async def _plain_asgi(scope: object, receive: object, send: object) -> None:
    """Stands for an ASGI app mrtr did not build (Starlette, FastAPI, middleware)."""


def test_19_another_asgi_app_is_served_as_it_is(
    uvicorn_runs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(apps, "plain", _plain_asgi, raising=False)
    monkeypatch.setattr(apps, "make_plain", lambda: _plain_asgi, raising=False)
    with caplog.at_level(logging.WARNING, "mrtr.serve"):
        _serve.serve("tests.transports.apps:plain", port=9)
        _serve.serve("tests.transports.apps:make_plain", port=9, path="/other")
    assert [run["app"] for run in uvicorn_runs] == [_plain_asgi, _plain_asgi]
    assert caplog.messages == [
        "tests.transports.apps:make_plain is an ASGI app with its own settings: --path, "
        "--allow-host, --ask-timeout and --debug-worker-header do not apply to it"]
    with pytest.raises(ValueError, match="^tests.transports.apps:plain is an ASGI app: serve it "
                                         "over HTTP, or name its Server$"):
        _serve.serve("tests.transports.apps:plain", stdio=True)


def test_19_workers_serve_an_asgi_target_too(
    uvicorn_runs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apps, "plain", _plain_asgi, raising=False)
    _serve.serve("tests.transports.apps:plain", port=9, workers=2)
    assert _serve._worker_app() is _plain_asgi


def test_ask_timeout_reaches_the_session_endpoint_issue12(
    uvicorn_runs: list[dict[str, Any]],
) -> None:
    assert _serve.serve("tests.transports.apps:app", port=9, ask_timeout=2.5) == 0
    app = uvicorn_runs[0]["app"]
    assert isinstance(app, McpApp) and app.sessions is not None
    assert app.sessions.ask_timeout == 2.5
    assert _serve.serve("tests.transports.apps:app", port=9) == 0
    assert uvicorn_runs[1]["app"].sessions.ask_timeout == 600.0


def test_ask_timeout_reaches_every_worker_issue12(
    uvicorn_runs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MRTR_STATE_KEYS", generate_key())
    assert _serve.serve("tests.transports.apps:app", workers=2, port=9, ask_timeout=7.0) == 0
    worker = _serve._worker_app()  # what each worker process builds
    assert isinstance(worker, McpApp) and worker.sessions is not None
    assert worker.sessions.ask_timeout == 7.0


@pytest.mark.parametrize("seconds", [0.0, -1.0, float("nan"), float("inf")])
def test_ask_timeout_must_be_positive_issue12(
    uvicorn_runs: list[dict[str, Any]], seconds: float
) -> None:
    with pytest.raises(ValueError, match="^ask-timeout must be a positive number of seconds"):
        _serve.serve("tests.transports.apps:app", ask_timeout=seconds)
    assert uvicorn_runs == []
