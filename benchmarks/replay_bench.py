"""Replay speed against backtrader, and peak memory of the US hourly replay.

1. `sma_crossover` over the ten coins' full daily history (BTC from 2010), replayed by openbell
   into a fresh SQLite ledger, against backtrader running the same rule (SMA50 over SMA200 of the
   daily closes: target weight 1/N on a cross up, 0 on a cross down) on the same bars. Both run in
   this process, alternately, `--runs` times; the script prints each wall time, the medians and
   the ratio of the medians (openbell / backtrader; the target is <= 1.0), with each side's final
   portfolio value. The values are not expected to agree to the cent: openbell fills at the next
   open with slippage, lots and a minimum notional; backtrader fills at the next open without them.
2. Peak RSS of the US hourly replay (2025-10-01..2025-11-10) with every baseline, measured in a
   child process (`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`); the target is <= 400 MB.

Not a test: run it by hand, `.venv/bin/python benchmarks/replay_bench.py [--runs N] [--skip-rss]`.
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import backtrader as bt
import pandas as pd
import psycopg
from sqlalchemy import text
from sqlalchemy.engine import make_url

from openbell.markets.barfile import read_bundled
from openbell.ops.config.schema import load_config
from openbell.ops.logs.rendering import configure_logging
from openbell.ops.wiring.demo import BASELINES, RANDOM_SEED
from openbell.ops.wiring.planning import replay_from_config
from openbell.store.db import make_engine

CRYPTO_START = date(2010, 7, 17)
CRYPTO_END = date(2025, 12, 28)

CRYPTO_CONFIG = """
[store]
url = "sqlite:///{db}"

[markets.crypto]
universe = "crypto10"
cadence = "daily"
source = "ccxt:binance"
initial_cash = "10000"
allow_outside_coverage = true  # from 2010: crypto10 is vouched for from 2025-11-01 only
allow_partial_coverage = true  # from 2010: nine of its coins' bars start years later

[[agents]]
name = "sma-crossover"
kind = "sma_crossover"
markets = ["crypto"]
"""

US_CONFIG = """
[store]
url = "sqlite:///{db}"

[markets.us]
universe = "nasdaq100"
cadence = "hourly"
source = "yfinance"
initial_cash = "10000"
""" + "".join(  # every baseline, as the demo enrols them
    f'\n[[agents]]\nname = "{name}"\nkind = "{kind}"\nmarkets = ["us"]\n'
    + (f"seed = {RANDOM_SEED}\n" if kind == "random" else "")
    for name, kind in BASELINES
)

RSS_CHILD = """
import sys
from openbell.ops.entry import limit_malloc_arenas
limit_malloc_arenas()  # as the openbell command does, before anything starts a thread
from datetime import date
from openbell.ops.config.schema import load_config
from openbell.ops.wiring.demo import BASELINES, RANDOM_SEED
from openbell.ops.logs.rendering import configure_logging
configure_logging(level="warning", stream=sys.stderr)
from openbell.ops.wiring.planning import replay_from_config
config = load_config(sys.argv[1])
replay_from_config(config, start=date(2025, 10, 1), end=date(2025, 11, 11), market="us",
                   resume=False, show_progress=False)
"""


class SmaCross(bt.Strategy):  # type: ignore[misc]
    """The baseline's rule in backtrader: 1/N of the portfolio while SMA50 > SMA200."""

    def __init__(self) -> None:
        self.cross = {
            data: bt.ind.CrossOver(
                bt.ind.SMA(data.close, period=50), bt.ind.SMA(data.close, period=200)
            )
            for data in self.datas
        }

    def prenext(self) -> None:  # coins start on different dates: trade those that have started
        self.next()

    def next(self) -> None:
        weight = 1 / len(self.datas)
        for data in self.datas:
            if len(data) < 200:
                continue
            if self.cross[data][0] > 0:
                self.order_target_percent(data, weight)
            elif self.cross[data][0] < 0:
                self.order_target_percent(data, 0)


def crypto_frames() -> dict[str, pd.DataFrame]:
    barset = read_bundled("crypto-1d")
    frames = {}
    for symbol in barset.symbols:
        bars = barset.bars(symbol)
        frames[symbol] = pd.DataFrame(
            {
                "open": [float(bar.open) for bar in bars],
                "high": [float(bar.high) for bar in bars],
                "low": [float(bar.low) for bar in bars],
                "close": [float(bar.close) for bar in bars],
                "volume": [float(bar.volume) for bar in bars],
            },
            index=pd.DatetimeIndex([bar.start_at.replace(tzinfo=None) for bar in bars]),
        )
    return frames


def run_backtrader(frames: dict[str, pd.DataFrame]) -> tuple[float, float, float]:
    """Wall time, CPU time and final portfolio value of the rule in backtrader (taker fee
    10 bps)."""
    started, cpu = time.perf_counter(), time.process_time()
    cerebro = bt.Cerebro(stdstats=False)
    for symbol, frame in frames.items():
        cerebro.adddata(bt.feeds.PandasData(dataname=frame), name=symbol)
    cerebro.addstrategy(SmaCross)
    cerebro.broker.setcash(10_000)
    cerebro.broker.setcommission(commission=0.001)
    cerebro.run()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return seconds, cpu, float(cerebro.broker.getvalue())


def final_nav(db: Path) -> str:
    with sqlite3.connect(db) as connection:
        row = connection.execute(
            "SELECT nav FROM nav_snapshot WHERE kind = 'slot' ORDER BY at DESC LIMIT 1"
        ).fetchone()
    return str(row[0]) if row else "none"


def final_nav_at(url: str) -> str:
    """The last slot NAV of the ledger at `url` (any engine)."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            row = connection.execute(
                text("SELECT nav FROM nav_snapshot WHERE kind = 'slot' ORDER BY at DESC LIMIT 1")
            ).one_or_none()
    finally:
        engine.dispose()
    return str(row[0]) if row else "none"


def fresh_postgres_schema(url: str, name: str) -> str:
    """A URL of `url`'s database whose search path is a new, empty schema `name`."""
    parsed = make_url(url)
    conninfo = parsed.set(drivername="postgresql", query={}).render_as_string(False)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        connection.execute(f'CREATE SCHEMA "{name}"')
    options = {"options": f"-csearch_path={name}"}
    return (
        parsed.set(drivername="postgresql+psycopg")
        .update_query_dict(options)
        .render_as_string(hide_password=False)
    )


def drop_postgres_schema(url: str, name: str) -> None:
    conninfo = make_url(url).set(drivername="postgresql", query={}).render_as_string(False)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def run_openbell(
    workdir: Path, run: int, postgres: str | None = None
) -> tuple[float, float, int, str]:
    db = workdir / f"crypto-{run}.db"
    schema = f"replay_bench_{os.getpid()}_{run}"
    url = (
        f"sqlite:///{db.as_posix()}"
        if postgres is None
        else fresh_postgres_schema(postgres, schema)
    )
    config_path = workdir / f"crypto-{run}.toml"
    config_path.write_text(CRYPTO_CONFIG.replace("sqlite:///{db}", url))
    config = load_config(config_path)
    started, cpu = time.perf_counter(), time.process_time()
    report = replay_from_config(
        config,
        start=CRYPTO_START,
        end=CRYPTO_END,
        market="crypto",
        resume=False,
        show_progress=False,
    )
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    nav = final_nav_at(url)
    if postgres is not None:
        drop_postgres_schema(postgres, schema)
    return seconds, cpu, report.slots, nav


def peak_rss_mb(workdir: Path) -> float:
    config_path = workdir / "us.toml"
    config_path.write_text(US_CONFIG.format(db=(workdir / "us.db").as_posix()))
    subprocess.run([sys.executable, "-c", RSS_CHILD, str(config_path)], check=True)  # noqa: S603
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="write openbell's ledger to a fresh schema of this Postgres database per run "
        "(e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test) instead of a SQLite file",
    )
    args = parser.parse_args()
    configure_logging(level="warning", stream=sys.stderr)
    frames = crypto_frames()
    ours: list[float] = []
    theirs: list[float] = []
    our_cpu: list[float] = []
    their_cpu: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        slots = 0
        for run in range(0 if args.skip_speed else args.runs):
            seconds, cpu, slots, nav = run_openbell(workdir, run, args.postgres)
            ours.append(seconds)
            our_cpu.append(cpu)
            bt_seconds, bt_cpu, bt_value = run_backtrader(frames)
            theirs.append(bt_seconds)
            their_cpu.append(bt_cpu)
            print(
                f"run {run + 1}: openbell {seconds:.2f} s, CPU {cpu:.2f} s (final NAV {nav}), "
                f"backtrader {bt_seconds:.2f} s, CPU {bt_cpu:.2f} s (final value {bt_value:.2f})"
            )
        if ours:
            ratio = statistics.median(ours) / statistics.median(theirs)
            print(
                f"crypto10 daily sma_crossover, {slots} slots, "
                f"{'Postgres' if args.postgres else 'SQLite'} ledger: openbell median "
                f"{statistics.median(ours):.2f} s, backtrader median "
                f"{statistics.median(theirs):.2f} s, ratio {ratio:.2f} (target <= 1.0)"
            )
            # This process's CPU time (the Postgres server's is not in it): on a shared machine
            # it moves less with the other work than the wall time does.
            print(
                f"CPU time of this process: openbell median {statistics.median(our_cpu):.2f} s, "
                f"backtrader median {statistics.median(their_cpu):.2f} s, ratio "
                f"{statistics.median(our_cpu) / statistics.median(their_cpu):.2f}"
            )
        if not args.skip_rss:
            rss_mb = peak_rss_mb(workdir)
            print(f"US hourly replay, all baselines: peak RSS {rss_mb:.0f} MB (target <= 400)")


if __name__ == "__main__":
    main()
