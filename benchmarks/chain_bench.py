"""The hash chain's cost on the replay benchmark: the same replay with the chain on and off.

The replay is `replay_bench.py`'s: `sma_crossover` over the ten coins' full daily history (BTC
from 2010) into a fresh SQLite ledger (or, with `--postgres URL`, a fresh Postgres schema), and,
with `--us`, also the US hourly replay (2025-10-01..2025-11-10) with every baseline, the demo's
enrolment. Each scenario is run `--runs` times with the chain on and `--runs` times with it off
(`store.chain.chain_disabled`, a switch for this measurement only), alternately, in this
process; the script prints each wall time, the medians and the ratio of the medians
(chain on / chain off; the target is <= 1.10), and checks that both runs end at the same NAV and
that the chained ledger has one link per cycle.

Not a test: run it by hand, `.venv/bin/python benchmarks/chain_bench.py [--runs N] [--us]`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path

from sqlalchemy import text

from openbell.ops.config.schema import load_config
from openbell.ops.logs.rendering import configure_logging
from openbell.ops.wiring.planning import replay_from_config
from openbell.store.chain import chain_disabled
from openbell.store.db import make_engine

_HERE = Path(__file__).resolve().parent


def _replay_bench() -> object:
    """`benchmarks/replay_bench.py` as a module (its configs and Postgres helpers)."""
    spec = importlib.util.spec_from_file_location("replay_bench", _HERE / "replay_bench.py")
    if spec is None or spec.loader is None:
        raise SystemExit("benchmarks/replay_bench.py is missing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _replay_bench()


def counts(url: str) -> tuple[int, int, str]:
    """The ledger's cycles, links and last slot NAV."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            cycles = connection.execute(text("SELECT count(*) FROM cycle")).scalar_one()
            links = connection.execute(text("SELECT count(*) FROM cycle_digest")).scalar_one()
            nav = connection.execute(
                text("SELECT nav FROM nav_snapshot WHERE kind = 'slot' ORDER BY at DESC, id DESC")
            ).first()
    finally:
        engine.dispose()
    return int(cycles), int(links), str(nav[0]) if nav else "none"


@contextlib.contextmanager
def _chain(on: bool) -> Iterator[None]:
    if on:
        yield
    else:
        with chain_disabled():
            yield


def run(
    workdir: Path,
    label: str,
    config_text: str,
    market: str,
    start: date,
    end: date,
    *,
    chained: bool,
    postgres: str | None,
) -> tuple[float, float, int, int, str]:
    """One replay; its wall and CPU times, cycles, links and final NAV."""
    name = f"{label}-{'on' if chained else 'off'}-{time.monotonic_ns()}"
    schema = f"chain_bench_{name.replace('-', '_')}"
    url = (
        f"sqlite:///{(workdir / f'{name}.db').as_posix()}"
        if postgres is None
        else BENCH.fresh_postgres_schema(postgres, schema)  # type: ignore[attr-defined]
    )
    path = workdir / f"{name}.toml"
    path.write_text(config_text.replace("sqlite:///{db}", url))
    config = load_config(path)
    with _chain(chained):
        started, cpu = time.perf_counter(), time.process_time()
        replay_from_config(
            config, start=start, end=end, market=market, resume=False, show_progress=False
        )
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    cycles, links, nav = counts(url)
    if postgres is not None:
        BENCH.drop_postgres_schema(postgres, schema)  # type: ignore[attr-defined]
    return seconds, cpu, cycles, links, nav


def scenario(
    label: str, runs: int, replay: Callable[[bool], tuple[float, float, int, int, str]]
) -> float:
    """Run `replay` once to warm up, then chain on and off alternately `runs` times each; print
    and return the ratio of the median wall times (and print the CPU times' and the median of
    each pair's ratio, which the load of other processes on the machine moves less)."""
    times: dict[bool, list[float]] = {True: [], False: []}
    cpus: dict[bool, list[float]] = {True: [], False: []}
    navs: dict[bool, set[str]] = {True: set(), False: set()}
    replay(False)  # warm-up: the bars' files and the imports, not counted
    for index in range(runs):
        for chained in (True, False) if index % 2 == 0 else (False, True):
            seconds, cpu, cycles, links, nav = replay(chained)
            times[chained].append(seconds)
            cpus[chained].append(cpu)
            navs[chained].add(nav)
            expected = cycles if chained else 0
            if links != expected:
                raise SystemExit(f"{label}: {links} links for {cycles} cycles (chain {chained})")
            print(
                f"{label} run {index + 1} chain {'on ' if chained else 'off'}: {seconds:7.2f} s"
                f" (CPU {cpu:6.2f} s; {cycles} cycles, {links} links, final NAV {nav})",
                flush=True,
            )
    if navs[True] != navs[False]:
        raise SystemExit(f"{label}: the chain changed the final NAV: {navs}")
    on, off = statistics.median(times[True]), statistics.median(times[False])
    ratio = on / off
    cpu = statistics.median(cpus[True]) / statistics.median(cpus[False])
    pairs = statistics.median(a / b for a, b in zip(times[True], times[False], strict=True))
    print(
        f"{label}: median chain on {on:.2f} s, off {off:.2f} s, ratio {ratio:.3f} (<= 1.10); "
        f"CPU ratio {cpu:.3f}; median of the pairs' ratios {pairs:.3f}"
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--us", action="store_true", help="Also the US hourly replay.")
    parser.add_argument("--postgres", help="A Postgres URL to replay into instead of SQLite.")
    args = parser.parse_args()
    configure_logging(level="error", stream=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        ratios = [
            scenario(
                "crypto daily",
                args.runs,
                lambda chained: run(
                    workdir,
                    "crypto",
                    BENCH.CRYPTO_CONFIG,  # type: ignore[attr-defined]
                    "crypto",
                    BENCH.CRYPTO_START,  # type: ignore[attr-defined]
                    BENCH.CRYPTO_END,  # type: ignore[attr-defined]
                    chained=chained,
                    postgres=args.postgres,
                ),
            )
        ]
        if args.us:
            ratios.append(
                scenario(
                    "us hourly",
                    args.runs,
                    lambda chained: run(
                        workdir,
                        "us",
                        BENCH.US_CONFIG,  # type: ignore[attr-defined]
                        "us",
                        date(2025, 10, 1),
                        date(2025, 11, 10),
                        chained=chained,
                        postgres=args.postgres,
                    ),
                )
            )
    print(f"worst ratio {max(ratios):.3f}")


if __name__ == "__main__":
    main()
