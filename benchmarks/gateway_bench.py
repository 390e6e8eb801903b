"""Throughput of the point-in-time gateway over the bundled US hourly replay data.

Runs 10,000 random gateway reads (half `bars()` with a lookback of 1 to 60 bars, half `quote()` of
1 to 10 symbols, at random bar boundaries or instants in the data's range) five times, and prints
the median queries per second. A seeded generator makes every run ask the same questions. Not a
test: run it by hand, `.venv/bin/python benchmarks/gateway_bench.py`.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from datetime import datetime, timedelta

from openbell.markets.domain import utc
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.replay_source import ReplaySource

QUERIES = 10_000
RUNS = 5


def plan(source: ReplaySource, seed: int) -> list[tuple[str, list[str], int, datetime]]:
    rng = random.Random(seed)  # noqa: S311 - a reproducible workload, not a secret
    symbols = sorted(source.symbols("1h"))
    starts = source.bar_starts("1h", utc(2000, 1, 1), utc(2100, 1, 1))
    queries = []
    for _ in range(QUERIES):
        now = rng.choice(starts)
        if rng.random() < 0.5:
            now += timedelta(minutes=rng.randrange(0, 24 * 60))
        kind = rng.choice(("bars", "quote"))
        chosen = rng.sample(symbols, rng.randint(1, 10))
        queries.append((kind, chosen, rng.randint(1, 60), now))
    return queries


async def run_once(
    gateway: PointInTimeGateway, queries: list[tuple[str, list[str], int, datetime]]
) -> float:
    started = time.perf_counter()
    for kind, symbols, lookback, now in queries:
        if kind == "bars":
            await gateway.bars(symbols[0], "1h", lookback, now)
        else:
            await gateway.quote(symbols, now)
    return QUERIES / (time.perf_counter() - started)


async def main() -> None:
    started = time.perf_counter()
    source = ReplaySource.from_bundled("us", names=["us-1h"])
    gateway = PointInTimeGateway(source)
    queries = plan(source, seed=20251001)
    print(f"setup (load us-1h, calendar, plan): {time.perf_counter() - started:.2f} s")
    rates = [await run_once(gateway, queries) for _ in range(RUNS)]
    print(f"runs (queries/s): {', '.join(f'{rate:,.0f}' for rate in rates)}")
    print(
        f"median: {statistics.median(rates):,.0f} queries/s over {QUERIES:,} bars()+quote() calls"
    )


if __name__ == "__main__":
    asyncio.run(main())
