"""Postgres at scale: three daemons sharing one ledger, every cycle exactly once, and their
throughput in cycles per second against one daemon doing the same work.

What is measured (issue 14, target 4): 500 hourly crypto slots with 20 agents (four of each rule
baseline: `buy_and_hold`, `equal_weight`, `sma_crossover`, `cash`, `random` with seeds 1-4), so
10,000 cycles, run once by one daemon and once by three daemons sharing the ledger, alternately,
`--runs` times each, each run into a fresh Postgres schema (created at the start of the run and
dropped at its end). The bars are a seeded random walk of the ten `crypto10` coins
(`synthetic_bars.py`, generated into a temporary folder: hourly bars over the 500 slots, daily bars
from 260 days before so that SMA(200) has its history).

Each daemon is a process of its own that does what the live daemon (`daemon/live.py`) does at a
bell: at each slot it orders the accounts by `claim_order` (rotated by its run id and the slot, as
live daemons sharing a ledger do) and calls `CycleRunner.run_slot`, whose unique (account, slot)
claim decides which daemon runs which cycle; after each session (midnight UTC) it writes the close
NAV snapshots (`write_close_snapshots`), as every live daemon does at the close bell. Its desk is
built by `build_desks` with the daemon's clock (the sources wrapped to retry within the grace). The
clock is simulated: instead of waiting an hour, all daemons ring the next slot as soon as every
daemon has finished the current one (a barrier), so an account's cycles still run in slot order and
the time measured is the daemons' own work. The time runs from the moment every daemon has started
(imports, engine, desks: not counted) to the end of the last slot.

Checks, each run (the script stops with an error when one fails): the ledger has exactly one cycle
per (account, slot), none missing, every one `done`; `verify_ledger` finds no breach; and the final
state of every account (cash, positions value, NAV of its last slot snapshot) is the same in every
run, one daemon or three: the baselines are deterministic, so sharing the work must not change it.

Not a test: run it by hand, `.venv/bin/python benchmarks/pg_daemons_bench.py [URL] [--runs 3]`
(URL default `postgresql://127.0.0.1:5432/test`; it needs CREATE on the database). Figures: each
run's wall time, cycles per second and how the cycles were split among the daemons; then the
median throughput of one and of three daemons and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import text
from sqlalchemy.engine import make_url
from synthetic_bars import write_walk

DEFAULT_URL = "postgresql://127.0.0.1:5432/test"
MARKET = "crypto"
START_DAY = date(2024, 3, 4)
KINDS = ("buy_and_hold", "equal_weight", "sma_crossover", "cash", "random")
AGENTS_PER_KIND = 4
#: The daemon's claim lease in clock seconds; slots are rung back to back, so it never ends.
LEASE_S = 3600.0


class CheckFailed(Exception):
    """A run broke what the benchmark checks: a cycle twice or missing, a breach, changed state."""


def check(holds: bool, what: str) -> None:
    if not holds:
        raise CheckFailed(what)


def fresh_schema(url: str, name: str) -> str:
    """Create schema `name` on `url`'s database; a store URL whose connections use it."""
    parsed = make_url(url)
    conninfo = parsed.set(drivername="postgresql", query={}).render_as_string(False)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA "{name}"')
    query = {"options": f"-csearch_path={name}", "application_name": name}
    store = parsed.set(drivername="postgresql+psycopg").update_query_dict(query)
    return store.render_as_string(hide_password=False)


def drop_schema(url: str, name: str) -> None:
    parsed = make_url(url)
    conninfo = parsed.set(drivername="postgresql", query={}).render_as_string(False)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def agents() -> tuple[Any, ...]:
    from openbell.agents.baselines import build_agent

    return tuple(
        build_agent(
            kind,
            f"{kind.replace('_', '-')}-{n}",
            market=MARKET,
            seed=n if kind == "random" else None,
        )
        for kind in KINDS
        for n in range(1, AGENTS_PER_KIND + 1)
    )


def market_plan(bars: Path) -> Any:
    from openbell.daemon.plan import MarketPlan
    from openbell.markets.replay_source import ReplaySource
    from openbell.markets.universes import load_universe

    source = ReplaySource.from_paths(MARKET, [bars])
    return MarketPlan(
        market=MARKET,
        source=source,
        universe=load_universe("crypto10"),
        cadence="hourly",
        initial_cash=Decimal(10000),
        agents=agents(),
        fill_price=source.first_price_at_or_after,
        grace=timedelta(minutes=30),
    )


def daemon(
    store_url: str,
    bars: str,
    slots: list[datetime],
    run_id: str,
    start: Any,
    step: Any,
    results: Any,
) -> None:
    """One daemon process: ring every slot (and each session's close), a barrier after each."""
    from openbell.daemon.clock import SimulatedClock
    from openbell.daemon.plan import build_desks
    from openbell.daemon.runner import CycleRunner, claim_order
    from openbell.markets.calendars import calendar_for
    from openbell.markets.rules import rules_for
    from openbell.ops.logs.rendering import configure_logging
    from openbell.store.cache import SqlBarCache
    from openbell.store.db import make_engine
    from openbell.store.ledger import Ledger

    configure_logging(level="warning", stream=sys.stderr)
    engine = make_engine(store_url)
    ledger = Ledger(engine)
    plan = market_plan(Path(bars))
    clock = SimulatedClock(slots[0] - timedelta(minutes=1))
    desks, accounts = build_desks(
        [plan], ledger, clock.now(), clock=clock, cache=SqlBarCache(engine)
    )
    runner = CycleRunner(
        ledger=ledger,
        desks=desks,
        run_id=run_id,
        lease=timedelta(seconds=LEASE_S),
        clock=clock.now,
    )
    calendar = calendar_for(rules_for(MARKET).calendar_id)
    opened = accounts[MARKET]
    ids = [account_id for account_id, _ in opened]

    async def ring() -> Counter[str]:
        statuses: Counter[str] = Counter()
        for slot_at in slots:
            day = calendar.session_of(slot_at)
            if day is not None and calendar.session_open(day) == slot_at and slot_at > slots[0]:
                # The close bell of the session before (crypto closes at the next midnight).
                now = clock.set(slot_at)
                await runner.write_close_snapshots(MARKET, now, ids)
            now = clock.set(slot_at)
            report = await runner.run_slot(
                MARKET, slot_at, claim_order(opened, run_id, slot_at), now
            )
            for outcome in report.outcomes:
                statuses[outcome.status.value if outcome.status else "not_run"] += 1
            step.wait()
        return statuses

    start.wait()
    started_s = time.perf_counter()
    statuses = asyncio.run(ring())
    results.put((run_id, time.perf_counter() - started_s, dict(statuses)))
    engine.dispose()


def open_accounts(store_url: str, bars: Path, at: datetime) -> None:
    from openbell.daemon.plan import build_desks
    from openbell.store.db import make_engine
    from openbell.store.ledger import Ledger
    from openbell.store.migrate import upgrade

    upgrade(store_url)
    engine = make_engine(store_url)
    try:
        build_desks([market_plan(bars)], Ledger(engine), at)
    finally:
        engine.dispose()


def check_ledger(store_url: str, slots: list[datetime], accounts: int) -> list[tuple[Any, ...]]:
    """Assert every (account, slot) has exactly one cycle, done; the ledger verifies. Returns each
    account's final (agent, cash, positions value, NAV) for comparison across runs."""
    from openbell.store.db import make_engine
    from openbell.store.verify import verify_ledger

    engine = make_engine(store_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT account_id, slot_at, count(*), min(status), max(status) FROM cycle "
                    "GROUP BY account_id, slot_at"
                )
            ).all()
            final = connection.execute(
                text(
                    "SELECT agent.name, snap.cash, snap.positions_value, snap.nav "
                    "FROM nav_snapshot AS snap JOIN account ON account.id = snap.account_id "
                    "JOIN agent ON agent.id = account.agent_id "
                    "WHERE snap.kind = 'slot' AND snap.at = :last ORDER BY agent.name"
                ),
                {"last": slots[-1]},
            ).all()
        report = verify_ledger(engine)
    finally:
        engine.dispose()
    twice = [row for row in rows if row[2] != 1]
    check(not twice, f"cycles run more than once: {twice[:5]}")
    seen = {(row[0], row[1].astimezone(UTC)) for row in rows}
    ids = {row[0] for row in rows}
    check(len(ids) == accounts, f"{len(ids)} accounts have cycles, not {accounts}")
    missing = [(a, s) for a in ids for s in slots if (a, s) not in seen]
    check(not missing, f"{len(missing)} cycles missing, e.g. {missing[:3]}")
    check(len(rows) == accounts * len(slots), f"{len(rows)} cycles, {accounts * len(slots)} slots")
    statuses = {row[3] for row in rows} | {row[4] for row in rows}
    check(statuses == {"done"}, f"cycle statuses {statuses}, not only done")
    check(report.ok, f"verify_ledger: {[breach.line() for breach in report.breaches[:5]]}")
    check(len(final) == accounts, f"{len(final)} final snapshots, not {accounts}")
    return [tuple(str(value) for value in row) for row in final]


def run_once(url: str, bars: Path, slots: list[datetime], daemons: int, tag: str) -> dict[str, Any]:
    schema = f"openbell_pgbench_{os.getpid()}_{tag}"
    store_url = fresh_schema(url, schema)
    try:
        open_accounts(store_url, bars, slots[0] - timedelta(minutes=1))
        context = mp.get_context("spawn")
        start = context.Barrier(daemons + 1)
        step = context.Barrier(daemons)
        results = context.Queue()
        processes = [
            context.Process(
                target=daemon,
                args=(store_url, str(bars), slots, f"daemon-{n}", start, step, results),
            )
            for n in range(daemons)
        ]
        for process in processes:
            process.start()
        start.wait(timeout=300)  # every daemon has started
        outcomes = [results.get(timeout=3600) for _ in processes]
        for process in processes:
            process.join(timeout=60)
            check(process.exitcode == 0, f"a daemon exited with {process.exitcode}")
        wall_s = max(elapsed for _, elapsed, _ in outcomes)
        final = check_ledger(store_url, slots, len(agents()))
        done = {run_id: statuses.get("done", 0) for run_id, _, statuses in outcomes}
        return {"daemons": daemons, "wall_s": wall_s, "done": done, "final": final}
    finally:
        drop_schema(url, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", default=DEFAULT_URL)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--slots", type=int, default=500)
    parser.add_argument("--daemons", type=int, default=3)
    args = parser.parse_args()
    from openbell.markets.slots import slots_between
    from openbell.markets.universes import load_universe

    start_at = datetime.combine(START_DAY, datetime.min.time(), tzinfo=UTC)
    days = args.slots // 24 + 2
    slots = slots_between(MARKET, "hourly", start_at, start_at + timedelta(days=days))[: args.slots]
    cycles = len(slots) * len(KINDS) * AGENTS_PER_KIND
    results: dict[int, list[dict[str, Any]]] = {1: [], args.daemons: []}
    finals: list[list[tuple[Any, ...]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        bars = Path(tmp)
        write_walk(
            bars,
            market=MARKET,
            symbols=load_universe("crypto10").symbols,
            daily_from=START_DAY - timedelta(days=260),
            hourly_from=START_DAY,
            end=START_DAY + timedelta(days=days),
        )
        for run in range(args.runs):
            for daemons in (1, args.daemons):
                figures = run_once(args.url, bars, slots, daemons, f"{run}_{daemons}")
                finals.append(figures.pop("final"))
                check(finals[-1] == finals[0], "the accounts' final state differs between runs")
                results[daemons].append(figures)
                split = ", ".join(f"{k} {v}" for k, v in sorted(figures["done"].items()))
                print(
                    f"run {run + 1}, {daemons} daemon(s): {cycles} cycles in "
                    f"{figures['wall_s']:.1f} s, {cycles / figures['wall_s']:.1f} cycles/s "
                    f"(done by {split}); every cycle exactly once, ledger verifies",
                    flush=True,
                )
    one = statistics.median(cycles / f["wall_s"] for f in results[1])
    many = statistics.median(cycles / f["wall_s"] for f in results[args.daemons])
    print(
        f"{len(slots)} hourly slots x {len(KINDS) * AGENTS_PER_KIND} agents = {cycles} cycles on "
        f"Postgres, medians of {args.runs} alternating runs: 1 daemon {one:.1f} cycles/s, "
        f"{args.daemons} daemons {many:.1f} cycles/s: ratio {many / one:.2f}; final state "
        "identical in every run"
    )


if __name__ == "__main__":
    main()
