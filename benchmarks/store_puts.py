"""What one put_if_absent costs the server's own process, on each store, by concurrency.

`python -m benchmarks.store_puts [--stores memory,sqlite,redis,postgresql] [--concurrency 1,32]
[--puts N] [--outcome BYTES] [--url URL]`

`C` writers on one event loop each record rounds with `put_if_absent` (how the ledger records a
round that does not act: keys led by a deadline, `--outcome`-byte outcomes) until `puts` are
done. Per store and concurrency: puts per second (wall) and this process's CPU µs per put
(`time.process_time`; a networked store's server runs in its own process and is not counted,
as it is not in mrtr's). `redis` and `postgresql` start their own server on a free port, as
`make bench` does (redis-server with an append-only file, PostgreSQL with fsync on), and stop
it by its PID afterwards; a store whose server is not installed is skipped with the reason.
`--url` measures the store at that URL instead (its server left as it is).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchmarks.postgres import Postgres
from benchmarks.run import Abort, free_port, start_redis, stop_redis
from mrtr.stores import ClaimStatus, Store, store_from_url

__all__ = ["STORES", "main", "measure"]

STORES = ("memory", "sqlite", "redis", "postgresql")


@contextlib.contextmanager
def _url(kind: str, folder: Path) -> Iterator[str]:
    """A store URL of `kind`, its server started in `folder` (RuntimeError: not installed)."""
    if kind == "memory":
        yield "memory:"
    elif kind == "sqlite":
        yield f"sqlite:///{folder / 'puts.db'}"
    elif kind == "redis":
        try:
            process = start_redis(port := free_port(), folder, "none")
        except Abort as exc:
            raise RuntimeError(str(exc)) from None
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            stop_redis(process)
    elif kind == "postgresql":
        server = Postgres(free_port(), folder / "postgres.log")
        try:
            yield server.url
        finally:
            server.stop()
    else:
        raise ValueError(f"unknown store {kind!r}: use {', '.join(STORES)}")


async def _puts(store: Store, concurrency: int, puts: int, size: int) -> tuple[float, float]:
    """(puts per second, CPU µs per put) of `puts` new rounds written by `concurrency` writers."""
    expires = time.time() + 600
    outcome, lead, done = b"x" * size, f"round:{int(expires * 1000):012x}:", 0

    async def writer(w: int) -> None:
        nonlocal done
        while done < puts:
            done += 1
            claim = await store.put_if_absent(f"{lead}{time.monotonic_ns()}-{w}-{done}", outcome,
                                              expires=expires)
            assert claim.status is ClaimStatus.NEW, claim

    await writer(-1)  # opens the connection, loads scripts: not counted
    done = 0
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(concurrency)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return done / wall, cpu / done * 1e6


def measure(url: str, concurrency: Sequence[int], puts: int,
            size: int = 300) -> dict[int, tuple[float, float]]:
    """{concurrency: (puts per second, CPU µs per put)} on the store at `url`."""

    async def run() -> dict[int, tuple[float, float]]:
        store = store_from_url(url)
        try:
            return {c: await _puts(store, c, puts, size) for c in concurrency}
        finally:
            await store.aclose()

    return asyncio.run(run())


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.store_puts", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stores", default=",".join(STORES), help="default: all of them")
    p.add_argument("--url", help="measure the store at this URL instead")
    p.add_argument("--concurrency", default="1,32", help="writers at once (default 1,32)")
    p.add_argument("--puts", type=int, default=3000, help="puts per cell (default 3000)")
    p.add_argument("--outcome", type=int, default=300, help="outcome bytes (default 300)")
    a = p.parse_args(argv)
    levels = [int(c) for c in a.concurrency.split(",")]
    print("| store | c | puts/s | CPU µs per put |\n|---|---:|---:|---:|")
    for kind in [a.url] if a.url else a.stores.split(","):
        with tempfile.TemporaryDirectory(prefix="mrtr-store-puts-") as tmp:
            try:
                with (contextlib.nullcontext(a.url) if a.url else _url(kind, Path(tmp))) as url:
                    found = measure(url, levels, a.puts, a.outcome)
            except RuntimeError as exc:
                print(f"| {kind} | — | skipped: {exc} | |")
                continue
        for c, (rate, cpu) in found.items():
            print(f"| {kind} | {c} | {rate:,.0f} | {cpu:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
