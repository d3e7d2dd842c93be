"""A client that disconnects, then retries, is charged once, however `mrtr serve` runs (#25).

The tool charges inside `ctx.once`, then awaits its provider for 2 s; the client gives up
after 0.5 s (the HTTP layer cancels the handler when it goes) and retries. Before #25 the
cancellation released the claim and the retry charged again: 2 charges in each setup.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from tests.faults.harness import Flow, books, check, drive
from tests.transports.conftest import cli_env, free_port, spawn_cli, stop, wait_ready

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("options", [[], ["--workers", "2"], ["--store", "memory:"]],
                         ids=["1 worker", "--workers 2", "--store memory:"])
def test_25_disconnect_then_retry_charges_once(tmp_path: Path, options: list[str],
                                               report: list[str]) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**cli_env(), "FAULTS_DIR": str(tmp_path)}
    with (tmp_path / "serve.log").open("wb") as log:
        process = spawn_cli("serve", "tests.faults.app:app", "--port", str(port),
                            "--log-level", "warning", *options,
                            stdout=subprocess.DEVNULL, stderr=log, env=env)
    flows = [Flow(f"retry-{n}", "inside-fn") for n in range(3)]
    try:
        wait_ready(url, process)

        async def main() -> list[Flow]:
            return await asyncio.gather(*(drive(flow, lambda n: url, hold=2.0,
                                                first_timeout=0.5) for flow in flows))

        try:
            asyncio.run(asyncio.wait_for(main(), 60))
        finally:
            books(tmp_path, flows)
        setup = " ".join(options) or "1 worker, default store"
        charges = [f.charges for f in flows]
        report.append(f"disconnect then retry [mrtr serve {setup}]: {len(flows)} flows, "
                      f"keyed charges {charges}, fn runs (an unkeyed effect) "
                      f"{[f.attempts for f in flows]}, answers {[f.answers for f in flows]}")
        check(flows)
        assert all(f.answers[0] == "timeout" for f in flows)
    except AssertionError:
        print((tmp_path / "serve.log").read_text()[-3000:])
        raise
    finally:
        stop(process)
