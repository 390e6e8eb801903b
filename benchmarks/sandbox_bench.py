"""What the jail costs a strategy run: `run_strategy` in bubblewrap against the plain subprocess.

Runs one momentum strategy on the same bars (10 symbols, 250 daily bars, a seeded random walk)
`--runs` times each way, alternating jailed and plain runs so that both see the same machine, and
prints the median wall time of a run (start to answer, as the agent waits for it) for each, the
difference and the ratio. The plain run is what `[sandbox] allow_unsandboxed` falls back to (and
what every run was before the jail): `python -I child.py` with an empty environment. The jail is
probed once before the first run (its probe time is printed apart). To tell bubblewrap's own
cost from the child's, it also times the bare interpreter (`python -I -S -c pass`) started plain
and in the same jail. Not a test: run it by hand,
`.venv/bin/python benchmarks/sandbox_bench.py [--runs 20]`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from datetime import timedelta
from decimal import Decimal

from openbell.agents.jail.process import start
from openbell.agents.strategy_code.sandbox import (
    RunOutcome,
    SandboxLimits,
    run_strategy,
    strategy_jail,
    strategy_support,
)
from openbell.markets.domain import Bar, utc

SYMBOLS = tuple(f"SYM{index:02d}" for index in range(10))
BARS = 250
LIMITS = SandboxLimits(cpu_s=10, memory_mb=1024, wall_s=60.0)
STRATEGY = """
import numpy as np
import pandas as pd


def strategy(bars):
    scores = {}
    for symbol, frame in bars.items():
        close = frame["close"]
        fast = close.rolling(10).mean().iloc[-1]
        slow = close.rolling(50).mean().iloc[-1]
        scores[symbol] = (fast / slow - 1) / (np.log(close).diff().rolling(20).std().iloc[-1])
    ranked = pd.Series(scores).sort_values(ascending=False)
    return {symbol: 0.3 for symbol in list(ranked.index)[:3]}
"""


def walk(seed: int) -> dict[str, list[Bar]]:
    """The bars of every symbol: a seeded random walk of daily closes."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible workload, not a secret
    start = utc(2024, 1, 1)
    found = {}
    for symbol in SYMBOLS:
        price = 100.0
        rows = []
        for day in range(BARS):
            price *= 1 + rng.gauss(0.0005, 0.02)
            close = Decimal(f"{price:.4f}")
            rows.append(
                Bar(
                    symbol=symbol,
                    start_at=start + timedelta(days=day),
                    end_at=start + timedelta(days=day + 1),
                    open=close,
                    high=close,
                    low=close,
                    close=close,
                    volume=Decimal(1000),
                )
            )
        found[symbol] = rows
    return found


async def once(bars: dict[str, list[Bar]], *, sandboxed: bool) -> float:
    began = time.perf_counter()
    result = await run_strategy(STRATEGY, bars, offered=SYMBOLS, limits=LIMITS, sandboxed=sandboxed)
    took = time.perf_counter() - began
    if result.outcome is not RunOutcome.OK or len(result.weights) != 3:
        raise SystemExit(f"the benchmark's strategy did not run: {result}")
    return took


async def bare(*, jailed: bool) -> float:
    """One start of the bare interpreter, plain or in the strategy jail."""
    python, found = strategy_jail()
    argv = [python.python, "-I", "-S", "-c", "pass"]
    began = time.perf_counter()
    process = await start(
        argv, jail=(python.jail, found) if jailed else None, stdin=asyncio.subprocess.DEVNULL
    )
    await process.process.communicate()
    took = time.perf_counter() - began
    await process.kill()
    return took


async def main(runs: int) -> None:
    began = time.perf_counter()
    support = strategy_support()
    if support.jail is None:
        raise SystemExit(f"no jail here: {support.reason}")
    print(f"jail probe (once per process): {time.perf_counter() - began:.2f} s")
    bars = walk(seed=20251101)
    await once(bars, sandboxed=True)  # warm the page cache for both
    await once(bars, sandboxed=False)
    jailed: list[float] = []
    plain: list[float] = []
    for _ in range(runs):
        jailed.append(await once(bars, sandboxed=True))
        plain.append(await once(bars, sandboxed=False))
    jail_s, plain_s = statistics.median(jailed), statistics.median(plain)
    bare_plain = statistics.median([await bare(jailed=False) for _ in range(runs)])
    bare_jail = statistics.median([await bare(jailed=True) for _ in range(runs)])
    print(
        f"bare interpreter: plain {bare_plain * 1000:.0f} ms, jailed {bare_jail * 1000:.0f} ms "
        f"(bubblewrap's own cost: {(bare_jail - bare_plain) * 1000:+.0f} ms)"
    )
    print(f"runs: {runs} each way, {len(SYMBOLS)} symbols x {BARS} daily bars")
    print(f"plain subprocess (before): median {plain_s:.3f} s (min {min(plain):.3f})")
    print(f"bubblewrap jail (after):   median {jail_s:.3f} s (min {min(jailed):.3f})")
    print(f"cost of the jail: {jail_s - plain_s:+.3f} s a run, ratio {jail_s / plain_s:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(main(parser.parse_args().runs))
