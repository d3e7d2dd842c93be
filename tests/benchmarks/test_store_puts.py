"""benchmarks.store_puts runs end to end on every store this machine has; no timing assertions."""

from __future__ import annotations

import pytest

from benchmarks import store_puts
from tests.stores.conftest import POSTGRES_BIN, REDIS_SERVER


def test_31_store_puts_measures_each_level_on_the_local_stores() -> None:
    found = store_puts.measure("memory:", [1, 4], 40)
    assert sorted(found) == [1, 4]
    assert all(rate > 0 and cpu > 0 for rate, cpu in found.values())


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgresql"])
def test_31_store_puts_starts_and_stops_the_server_a_store_needs(
        kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    if kind == "redis" and REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run does)")
    if kind == "postgresql" and POSTGRES_BIN is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    assert store_puts.main(["--stores", kind, "--concurrency", "1,8", "--puts", "40"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {kind} |")]
    assert [row.split(" | ")[1] for row in rows] == ["1", "8"], rows


def test_31_store_puts_names_an_unknown_store() -> None:
    with pytest.raises(ValueError, match="unknown store 'nosuch'"):
        store_puts.main(["--stores", "nosuch", "--puts", "4"])
