"""benchmarks.run's setup steps that need no subprocess: options, shared folder, targets file."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from benchmarks.postgres import Postgres, postgres_bin
from benchmarks.run import (
    REPO,
    Abort,
    export_baseline,
    find_shared,
    make_workdir,
    parse_args,
    start_redis,
    stop_redis,
    targets_spec,
)
from tests.stores.conftest import REDIS_SERVER


def test_quick_sets_short_runs_and_explicit_options_win() -> None:
    a = parse_args(["--quick", "--duration", "4"])
    assert (a.repeats, a.duration, a.warmup, a.quiet_wait, a.retry_disturbed) == (1, 4, 1, 5, 0)
    full = parse_args([])
    assert (full.repeats, full.duration, full.quiet_wait, full.retry_disturbed) == (3, 5, 60, 2)
    assert full.only == ("mrtr,mrtr-nostore,mrtr-memory,mrtr-redis,mrtr-postgres,sdk,sdk-json,"
                         "sdk-manual,"
                         "ts-sdk,fastmcp,floor-uvicorn,floor-uvicorn-sqlite")
    assert parse_args(["--baseline", "HEAD~1"]).only.endswith(",floor-uvicorn-sqlite,mrtr-base")
    assert parse_args(["--baseline", "x", "--only", "mrtr"]).only == "mrtr"


def test_missing_shared_folder_is_a_clear_exit_2(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MRTR_BENCH_SHARED", raising=False)
    with pytest.raises(Abort) as info:
        find_shared(tmp_path / "nowhere")
    assert info.value.status == 2
    assert "--shared" in str(info.value) and "\n" not in str(info.value)


def test_targets_file_copies_sdk_and_floor_and_adds_mrtr() -> None:
    shared = {name: {"cmd": name} for name in ("sdk", "sdk-json", "sdk-manual", "floor-uvicorn",
                                               "ts-sdk")}
    spec = targets_spec(shared, Path("/x/.venv/bin/mrtr"))
    assert [k for k in spec if not k.startswith("_")] == [
        "sdk", "sdk-json", "sdk-manual", "ts-sdk", "floor-uvicorn", "mrtr", "mrtr-nostore",
        "mrtr-memory", "mrtr-redis", "mrtr-postgres", "mrtr-nootel", "mrtr-otel-sdk", "mrtr-auth",
        "mrtr-auth-dpop"]
    changed = targets_spec(shared, Path("/x/.venv/bin/mrtr"), peers={"ts-sdk": {"cmd": "n"}})
    assert changed["ts-sdk"] == {"cmd": "n"} and changed["sdk"] == {"cmd": "sdk"}
    assert "serve benchmarks.auth:create_app " in spec["mrtr-auth"]["cmd"]
    assert "serve benchmarks.auth:create_dpop_app " in spec["mrtr-auth-dpop"]["cmd"]
    assert spec["mrtr-nostore"]["cmd"] == spec["mrtr"]["cmd"] + " --store none"
    assert spec["mrtr-redis"]["cmd"].endswith(" --store redis://127.0.0.1:6379/0")
    assert spec["mrtr-postgres"]["cmd"].endswith(
        " --store postgresql://postgres@127.0.0.1:5432/postgres")
    assert spec["sdk"] == {"cmd": "sdk"}
    mrtr = spec["mrtr"]
    assert mrtr["cmd"].startswith("/x/.venv/bin/mrtr serve benchmarks.server:app ")
    assert "--host 127.0.0.1 --port {port}" in mrtr["cmd"]
    assert mrtr["env"] == {"PYTHONPATH": str(REPO)} and mrtr["path"] == "/mcp"


def test_otel_targets_hide_the_package_or_configure_the_sdk_16() -> None:
    spec = targets_spec({}, Path("/x/.venv/bin/mrtr"))
    hidden = spec["mrtr-nootel"]
    assert hidden["cmd"] == spec["mrtr"]["cmd"]
    shadow = Path(hidden["env"]["PYTHONPATH"].split(os.pathsep)[0])
    assert (shadow / "opentelemetry" / "__init__.py").is_file()
    assert "benchmarks.server_otel:app" in spec["mrtr-otel-sdk"]["cmd"]


def test_workdir_links_the_shared_files_and_owns_results(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "servers").mkdir(parents=True)
    (shared / "harness.py").write_text("")
    work = make_workdir(shared, tmp_path / "out")
    assert (work / "harness.py").resolve() == (shared / "harness.py").resolve()
    assert (work / "servers").is_symlink()
    assert (work / "results").is_dir() and not (work / "results").is_symlink()
    assert make_workdir(shared, tmp_path / "out") == work  # idempotent


def test_baseline_target_serves_the_exported_checkout(tmp_path: Path) -> None:
    spec = targets_spec({}, Path("/x/.venv/bin/mrtr"), tmp_path / "baseline")
    assert spec["mrtr-base"]["cmd"] == spec["mrtr"]["cmd"]
    assert spec["mrtr-base"]["env"] == {
        "PYTHONPATH": f"{tmp_path / 'baseline' / 'src'}:{tmp_path / 'baseline'}"}
    assert "mrtr-base" not in targets_spec({}, Path("/x/.venv/bin/mrtr"))


def test_each_mrtr_target_keeps_its_key_and_default_store_in_a_state_folder_of_its_own(
    tmp_path: Path,
) -> None:
    spec = targets_spec({"sdk": {"cmd": "sdk"}}, Path("/x/.venv/bin/mrtr"), tmp_path / "b",
                        state=tmp_path / "state")
    homes = {name: entry["env"]["XDG_STATE_HOME"] for name, entry in spec.items()
             if name.startswith("mrtr")}
    assert homes["mrtr"] == str(tmp_path / "state" / "mrtr")
    assert len(set(homes.values())) == len(homes) and "mrtr-base" in homes
    assert spec["mrtr"]["env"]["PYTHONPATH"] == str(REPO) and "env" not in spec["sdk"]


def test_export_baseline_unpacks_the_ref_and_refuses_unknown_refs(tmp_path: Path) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing to export")
    base = export_baseline("HEAD", tmp_path)
    assert (base / "src" / "mrtr" / "__init__.py").is_file()
    assert (base / "benchmarks" / "server.py").is_file()
    with pytest.raises(Abort) as info:
        export_baseline("no-such-ref-anywhere", tmp_path / "other")
    assert info.value.status == 2 and "no-such-ref-anywhere" in str(info.value)


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
def test_13_the_redis_target_gets_a_redis_server_stopped_by_its_pid(tmp_path: Path) -> None:
    from benchmarks.run import free_port

    port = free_port()
    proc = start_redis(port, tmp_path, "none")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"PING\r\n")
            assert sock.recv(16).startswith(b"+PONG")
    finally:
        stop_redis(proc)
    assert proc.returncode is not None
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_the_dpop_target_verifies_a_fresh_proof_per_request_and_refuses_a_replay() -> None:
    import httpx

    from benchmarks.auth import create_dpop_app, micro
    from tests.transports.conftest import call, post_args, run

    app = create_dpop_app()

    async def go() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:9000") as c:
            lent = [(await c.post("/mcp", **post_args(call("echo", {"text": "hi"})))).status_code
                    for _ in range(3)]
            args = post_args(call("echo", {"text": "hi"}))
            guard = app.guard
            assert guard is not None
            token = guard.token  # type: ignore[attr-defined]
            proof = guard.client.proof(  # type: ignore[attr-defined]
                "POST", httpx.URL("http://127.0.0.1:9000/mcp"), access_token=token)
            args["headers"].update({"authorization": f"DPoP {token}", "dpop": proof})
            again = [(await c.post("/mcp", **args)).status_code for _ in range(2)]
            return lent + again

    assert run(go()) == [200, 200, 200, 200, 401]
    costs = micro(number=20)
    assert set(costs) == {"bearer RS256", "DPoP RS256 + ES256 proof", "DPoP, jti in SQLite",
                          "client: sign a proof"}


def test_31_peers_that_cannot_run_here_are_skipped_with_a_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks import peers

    shared = tmp_path / "shared"
    (shared / "servers" / "ts-sdk").mkdir(parents=True)
    for name in ("server.mjs", "package.json", "package-lock.json"):
        (shared / "servers" / "ts-sdk" / name).write_text("{}")
    monkeypatch.setattr(peers.shutil, "which", lambda name: None)  # no npm, no node
    names = ["mrtr", "ts-sdk", "fastmcp", "floor-uvicorn-sqlite"]
    changes, skipped = peers.setup_peers(
        names, ("ts-sdk", "fastmcp", "floor-uvicorn-sqlite"),
        {"ts-sdk": {"cmd": "node x"}, "fastmcp": {"cmd": "y"}}, shared, tmp_path / "venv",
        tmp_path / "fm")
    assert changes == {}
    assert set(skipped) == {"ts-sdk", "fastmcp", "floor-uvicorn-sqlite"}
    assert "npm is not installed" in skipped["ts-sdk"]
    assert "no FastMCP server" in skipped["fastmcp"]
    assert skipped["floor-uvicorn-sqlite"].startswith("not in ")


def test_31_the_ts_sdk_runs_from_links_to_the_shared_lock_file_and_its_own_node_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks import peers

    source = tmp_path / "shared" / "servers" / "ts-sdk"
    source.mkdir(parents=True)
    for name in ("server.mjs", "package.json", "package-lock.json", ".npmrc"):
        (source / name).write_text(name)
    ran: list[tuple[list[str], Path]] = []

    def fake_run(argv: list[str], cwd: Path, **kw: object) -> None:
        ran.append((argv, cwd))

    monkeypatch.setattr(peers.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(peers.subprocess, "run", fake_run)
    monkeypatch.setattr(peers.platform, "system", lambda: "Darwin")  # no registry node: PATH's
    venv = tmp_path / "venv"
    command = peers.ts_sdk_command(tmp_path / "shared", venv)
    assert command == (f"/usr/bin/node --preserve-symlinks --preserve-symlinks-main "
                       f"{venv / 'ts-sdk' / 'server.mjs'} --host 127.0.0.1 --port {{port}}")
    assert (venv / "ts-sdk" / "server.mjs").resolve() == source / "server.mjs"  # a link
    assert ran == [(["/usr/bin/npm", "ci", "--no-audit", "--no-fund"], venv / "ts-sdk")]
    peers.ts_sdk_command(tmp_path / "shared", venv)
    assert len(ran) == 1  # the lock file did not change: no second install

def test_31_the_ts_sdk_description_names_the_node_that_runs_it(tmp_path: Path) -> None:
    """The shared targets file says "Node 20"; the bench runs the Node 22 it installs."""
    from benchmarks import peers

    node = tmp_path / "node"
    node.write_text("#!/bin/sh\necho v22.11.0\n")
    node.chmod(0o755)
    command = f"{node} --preserve-symlinks server.mjs --port {{port}}"
    assert peers.described_node("McpServer on node:http, Node 20, 1 process", command) == (
        "McpServer on node:http, Node 22, 1 process")
    assert peers.described_node("McpServer", command) == "McpServer, Node 22"
    assert peers.described_node("Node 20", f"{tmp_path / 'absent'} x") == "Node 20"


@pytest.mark.skipif(postgres_bin() is None, reason="PostgreSQL is not installed")
def test_28_the_postgres_target_gets_a_server_of_its_own_stopped_by_its_pid(
        tmp_path: Path) -> None:
    from benchmarks.run import free_port

    port = free_port()
    server = Postgres(port, tmp_path / "postgres.log")
    folder = server.folder
    try:
        assert server.process.poll() is None
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass
    finally:
        server.stop()
    assert server.process.poll() is not None and not folder.exists()
