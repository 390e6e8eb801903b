"""Does the live daemon's event loop stall during a 50-agent slot? `/healthz` and an MCP `get_quote`
timed while the slot's cycles run, and the per-market view recomputed after a slot.

1. Stall: a live daemon (`daemon.live.run_live`, in a thread of this process, on a `ScaledClock`
   running `3600 / --period-s` times faster) rings the bundled crypto hourly bars from
   2025-11-03 with 50 baseline agents (the four deterministic baselines and 46 seeded `random`
   traders) and one outside agent (`McpAgent`) on a fresh SQLite ledger, serving `/healthz` and
   `/mcp` on one loopback port. Two child processes poll it, each one request every `--every-ms`
   (sequential; a late request is sent at once): one GETs `/healthz`, the other is the outside
   agent's client (the MCP SDK's streamable-HTTP client with the agent's token), which takes each
   slot's cycle (`wait_for_cycle`), calls `get_quote` for `--hold-s` seconds and finishes. This
   process watches the ledger (a read-only SQLite connection, every 5 ms) for when the last of
   each slot's baseline cycles finished: the slot's busy window runs from its bell (the slot's
   instant on the clock, in real time) to then.
   Each request sent inside a busy window counts (the others are shown apart); p50 and p99 of
   their latency, over `--slots` slots (the first slot, cold, is left out).
2. Views (with `--views`): the web benchmark's ledger (`web_ledger.py`: 50 agents, a year of
   crypto days and ten US sessions), copied and upgraded, behind an `ops.web.memo.ViewMemo`
   computing in the calling thread. Both markets' views are built; then, in turn, a slot of
   each market is written (each account's cycle claimed, its NAV snapshot written, the cycle
   finished, as a slot's cycles write them) and both views asked again: the time each takes
   after each market's slot, median of `--view-rounds` rounds; then each market's leaderboard
   and its significance suite as the API serves them (`GET /api/v1/leaderboard/{market}` and
   `.../significance` on the same memo, the view already computed: the document computed and
   rendered, or given again). With a version per market the other market's
   view and JSON are served from memory.

`--compare` runs each part twice: part 1 first with the slots not yielding (`live.YIELD_EVERY_S`
None: the baselines' cycles back to back in one turn of the loop, the stall as it was before the
slots yielded), then yielding; part 2 first with every view kept by the ledger's one version and
computed whole (as on main, before the version per market), then kept by the market's version and
computed whole, then kept by the market's version and read incrementally (the cycles' facts kept
between views, `ops.reports.cycle_facts`: as it is now).

Not a test: run it by hand, `.venv/bin/python benchmarks/stall.py [--slots N] [--compare]
[--views]` (the machine is shared: compare the figures of one run).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from openbell.agents.baselines import build_agent
from openbell.agents.outside.agent import McpAgent
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.agents.protocol import Agent
from openbell.daemon import live
from openbell.daemon.clock import ScaledClock
from openbell.daemon.live import YIELD_EVERY_S, run_live
from openbell.daemon.plan import LivePlan, MarketPlan
from openbell.daemon.stopping import StopRequest
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import load_universe
from openbell.ops.logs.rendering import configure_logging
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus, SnapshotKind

#: A Monday inside the bundled crypto hourly bars (they end 2025-11-10 07:00 UTC).
START_AT = datetime(2025, 11, 3, 0, 0, tzinfo=UTC)
OUTSIDE = "outside"
BASELINES = ("buy_and_hold", "equal_weight", "sma_crossover", "cash")
AGENTS = 50


def percentile(values: Sequence[float], share: float) -> float:
    """The `share` quantile of `values` (inclusive method)."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[round(share * 100) - 1]


def figures(values: Sequence[float]) -> str:
    if not values:
        return "no request"
    return (
        f"p50 {statistics.median(values) * 1000:7.1f} ms, p99 "
        f"{percentile(values, 0.99) * 1000:7.1f} ms, max {max(values) * 1000:7.1f} ms "
        f"(n={len(values)})"
    )


# -- the pollers (child processes) ----------------------------------------------------------


def spread(sent: float, seconds: float, every_s: float) -> list[tuple[float, float]]:
    """The request sent at `sent` that took `seconds`, and the requests a poller sending one
    every `every_s` would have sent meanwhile, each with the wait it would have had (a late
    answer holds the sequential poller back: without these, a stall counts once)."""
    samples = []
    late = 0.0
    while late < seconds:
        samples.append((sent + late, seconds - late))
        late += every_s
    return samples


def poll_health(base: str, every_s: float, stop: Any, out: Any) -> None:
    """GET `/healthz` every `every_s` until `stop`; (sent, seconds) of each to `out`."""
    timings: list[tuple[float, float]] = []
    with httpx.Client(base_url=base, timeout=60) as client:
        while not stop.is_set():
            sent = time.monotonic()
            client.get("/healthz")  # 200, or 503 while a market is overdue: an answer
            timings += spread(sent, time.monotonic() - sent, every_s)
            time.sleep(max(0.0, every_s - (time.monotonic() - sent)))
    out.put(("healthz", timings))


def poll_quotes(url: str, token: str, every_s: float, hold_s: float, stop: Any, out: Any) -> None:
    """The outside agent's client: every `every_s`, ask for a cycle (`wait_for_cycle` with a
    1 ms timeout); once it has one, `get_quote` every `every_s` for `hold_s`, and finish; until
    `stop`. (sent, seconds) of each call to `out`, `get_quote`s apart."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "kit"))
    from openbell_testkit.mcp import call, connect

    async def run() -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        quotes: list[tuple[float, float]] = []
        waits: list[tuple[float, float]] = []
        async with connect(url, token) as session:
            while not stop.is_set():
                sent = time.monotonic()
                waited, _ = await call(session, "wait_for_cycle", timeout_s=0.001)
                waits += spread(sent, time.monotonic() - sent, every_s)
                if waited.get("status") == "no_cycle":
                    await asyncio.sleep(max(0.0, every_s - (time.monotonic() - sent)))
                    continue
                until = time.monotonic() + hold_s
                while time.monotonic() < until and not stop.is_set():
                    sent = time.monotonic()
                    found, is_error = await call(session, "get_quote", symbols=["BTC/USDT"])
                    if is_error:
                        raise SystemExit(f"get_quote failed: {found}")
                    quotes += spread(sent, time.monotonic() - sent, every_s)
                    await asyncio.sleep(max(0.0, every_s - (time.monotonic() - sent)))
                await call(session, "finish", summary="polled quotes")
        return quotes, waits

    quotes, waits = asyncio.run(run())
    out.put(("get_quote", quotes))
    out.put(("MCP, any", quotes + waits))


# -- 1. the stall ---------------------------------------------------------------------------


@dataclass
class Window:
    """A slot's busy window: its bell (first: its first claim, as seen) and the last finish of its
    baseline cycles, as seen."""

    slot_at: str
    claimed_s: float
    finished_s: float | None = None


@dataclass
class Watch:
    windows: dict[str, Window] = field(default_factory=dict)


def watch_ledger(db: Path, baseline_ids: set[int], stop: threading.Event, watch: Watch) -> None:
    """Every 5 ms, note when each slot's baseline cycles were first seen and all finished."""
    sql = (
        "SELECT slot_at, sum(status != 'claimed') FROM cycle WHERE account_id IN "
        "(SELECT a.id FROM account a JOIN agent g ON g.id = a.agent_id WHERE g.name != ?) "
        "GROUP BY slot_at"
    )
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        while not stop.is_set():
            now = time.monotonic()
            try:
                rows = connection.execute(sql, (OUTSIDE,)).fetchall()
            except sqlite3.OperationalError:  # busy: next turn
                rows = []
            for slot_at, finished in rows:
                window = watch.windows.setdefault(slot_at, Window(slot_at, now))
                if window.finished_s is None and finished == len(baseline_ids):
                    window.finished_s = now
            time.sleep(0.005)
    finally:
        connection.close()


def agents() -> tuple[Agent, ...]:
    chosen = [build_agent(kind, kind.replace("_", "-"), market="crypto") for kind in BASELINES]
    chosen += [
        build_agent("random", f"random-{seed:02d}", market="crypto", seed=seed)
        for seed in range(1, AGENTS - len(BASELINES) + 1)
    ]
    return tuple(chosen)


def stall(period_s: float, slots: int, every_s: float, hold_s: float, *, yielding: bool) -> None:
    """Part 1, with the daemon's slots yielding to the loop (`live.YIELD_EVERY_S`) or, as on
    main before they did, never (`yielding` False: the baselines' cycles then run back to back
    in one turn of the loop, as their tasks each ran to its end at its turn)."""
    live.YIELD_EVERY_S = YIELD_EVERY_S if yielding else None
    print(f"-- slots {'yielding' if yielding else 'not yielding (as main)'}")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        url = f"sqlite:///{db.as_posix()}"
        upgrade(url)
        engine = make_engine(url)
        ledger = Ledger(engine)
        ledger.ensure_agent(OUTSIDE, "mcp", START_AT - timedelta(days=30))
        token = ledger.issue_agent_token(OUTSIDE, START_AT - timedelta(days=30))
        engine.dispose()
        hub = CycleHub()
        outside = McpAgent(
            name=OUTSIDE,
            hub=hub,
            budgets=OutsideBudgets(max_tool_calls=100_000, max_wall_s=max(60.0, 4 * hold_s)),
        )
        source = ReplaySource.from_bundled("crypto", names=["crypto-1h"])
        market = MarketPlan(
            market="crypto",
            source=source,
            universe=load_universe("crypto10"),
            cadence="hourly",
            initial_cash=Decimal(10000),
            agents=(*agents(), outside),
            fill_price=source.first_price_at_or_after,
            grace=timedelta(minutes=30),
        )
        plan = LivePlan(
            store_url=url,
            markets=(market,),
            http_listen=("127.0.0.1", 0),
            stop_grace_s=30,
            heartbeat_s=5,
            lease_s=3600,  # clock seconds: period_s real ones
        )
        speed = 3600 / period_s
        # The first bell one period after start-up (opening 51 accounts, verifying).
        clock_start_at = START_AT - timedelta(seconds=period_s * speed)
        clock_started_s = time.monotonic()
        clock = ScaledClock(clock_start_at, speed=speed)
        stop = StopRequest()
        errors: list[BaseException] = []

        def daemon() -> None:
            try:
                run_live(plan, clock, stop=stop)
            except BaseException as exc:  # noqa: BLE001  (reported below)
                errors.append(exc)

        thread = threading.Thread(target=daemon, daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while hub.mcp_url is None:
            if errors or time.monotonic() > deadline:
                raise SystemExit(f"the daemon did not start: {errors}")
            time.sleep(0.05)
        mcp_url = hub.mcp_url
        base = mcp_url.removesuffix("/mcp")
        with sqlite3.connect(db) as connection:
            baseline_ids = {
                row[0]
                for row in connection.execute(
                    "SELECT a.id FROM account a JOIN agent g ON g.id = a.agent_id "
                    "WHERE g.name != ?",
                    (OUTSIDE,),
                )
            }
        context = mp.get_context("spawn")
        halt, out = context.Event(), context.Queue()
        children = [
            context.Process(target=poll_health, args=(base, every_s, halt, out)),
            context.Process(target=poll_quotes, args=(mcp_url, token, every_s, hold_s, halt, out)),
        ]
        for child in children:
            child.start()
        watch = Watch()
        watching = threading.Event()
        watcher = threading.Thread(
            target=watch_ledger, args=(db, baseline_ids, watching, watch), daemon=True
        )
        watcher.start()
        ends_at = START_AT + timedelta(hours=slots)
        while clock.now() < ends_at + timedelta(hours=0.9) and not errors:
            time.sleep(0.1)
        halt.set()
        found = dict(out.get(timeout=120) for _ in range(3))
        for child in children:
            child.join(60)
        watching.set()
        watcher.join(10)
        stop.set()
        thread.join(120)
        if errors:
            raise errors[0]
    windows = sorted(
        (w for w in watch.windows.values() if w.finished_s is not None), key=lambda w: w.slot_at
    )[1:]  # the first slot is cold
    for window in windows:
        # From the bell (the slot's instant on the clock, in real time): a loop that does not
        # yield holds the GIL too, so this process's watcher sees the first claim late.
        bell_at = datetime.fromisoformat(window.slot_at).replace(tzinfo=UTC)
        window.claimed_s = clock_started_s + (bell_at - clock_start_at).total_seconds() / speed
    print(
        f"{len(windows)} slots x {len(baseline_ids)} baseline agents (+1 outside), the first "
        "left out; busy window (bell .. last baseline finish): median "
        f"{statistics.median([w.finished_s - w.claimed_s for w in windows]):.3f} s"  # type: ignore[operator]
    )
    for name in ("healthz", "get_quote", "MCP, any"):
        inside: list[float] = []
        outside_: list[float] = []
        for sent, seconds in found[name]:
            busy = any(w.claimed_s <= sent <= w.finished_s for w in windows)  # type: ignore[operator]
            (inside if busy else outside_).append(seconds)
        print(f"{name:<9} during slots: {figures(inside)}")
        print(f"{name:<9} between slots: {figures(outside_)}")


# -- 2. the views ---------------------------------------------------------------------------


def views(rounds: int, *, per_market: bool, incremental: bool = True) -> None:
    """Part 2, with the memo keeping a market's views by its own version or, as on main, by the
    ledger's one version (`per_market` False, never `incremental`), each view read incrementally
    (`incremental`) or whole."""
    incremental = incremental and per_market
    print(
        f"-- views kept by {'the market' if per_market else 'the ledger (as main)'}'s version, "
        f"{'read incrementally' if incremental else 'computed whole'}"
    )
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from starlette.applications import Starlette
    from starlette.testclient import TestClient
    from web_ledger import cached_ledger

    from openbell.ops.web.api import api_routes
    from openbell.ops.web.memo import ViewMemo
    from openbell.ops.web.view_worker import InProcessViews

    class LedgerVersionMemo(ViewMemo):
        """The memo as it was: every value kept by the ledger's one version."""

        def remember(self, kind: Any, key: Any, build: Any, *, market: str | None = None) -> Any:
            return super().remember(kind, key, build)

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        shutil.copyfile(cached_ledger(quiet=True), db)
        url = f"sqlite:///{db.as_posix()}"
        upgrade(url)
        engine = make_engine(url)
        ledger = Ledger(engine)
        source = InProcessViews(engine, incremental=incremental)
        memo = (
            ViewMemo(engine, views=source)
            if per_market
            else LedgerVersionMemo(engine, views=source)
        )
        client = TestClient(Starlette(routes=api_routes(engine, memo=memo)))
        client.__enter__()  # one event loop thread for every request, as a server has
        markets = ("us", "crypto")
        accounts: dict[str, list[int]] = {}
        slot_of: dict[str, datetime] = {}
        with sqlite3.connect(db) as connection:
            for market in markets:
                accounts[market] = [
                    row[0]
                    for row in connection.execute(
                        "SELECT id FROM account WHERE market = ?", (market,)
                    )
                ]
                (last,) = connection.execute(
                    "SELECT max(slot_at) FROM cycle c JOIN account a ON a.id = c.account_id "
                    "WHERE a.market = ?",
                    (market,),
                ).fetchone()
                slot_of[market] = datetime.fromisoformat(last).replace(tzinfo=UTC)
        timings: dict[tuple[str, str], list[float]] = {}
        started = time.perf_counter()
        for market in markets:
            memo.view(market)
            for url in (
                f"/api/v1/leaderboard/{market}",
                f"/api/v1/leaderboard/{market}/significance",
            ):
                assert client.get(url).status_code == 200  # noqa: S101
        print(f"both views, boards and significance, cold: {time.perf_counter() - started:.2f} s")
        for _ in range(rounds):
            for written in markets:
                # A synthetic slot a week after the market's last (no session gap): each account's
                # cycle claimed, its NAV snapshot written (every holding marked at 1: the time is
                # what is measured) and the cycle finished.
                slot_at = slot_of[written] = slot_of[written] + timedelta(days=7)
                for account_id in accounts[written]:
                    held = ledger.account_state(account_id, slot_at).positions
                    cycle_id = ledger.claim_cycle(
                        account_id, slot_at, "bench", slot_at + timedelta(minutes=1), slot_at
                    )
                    assert cycle_id is not None  # noqa: S101
                    marks = dict.fromkeys(held, Decimal(1))
                    ledger.write_nav_snapshot(
                        account_id, slot_at, SnapshotKind.SLOT, marks, cycle_id=cycle_id
                    )
                    ledger.finish_cycle(cycle_id, CycleStatus.DONE, slot_at)
                for market in markets:
                    started = time.perf_counter()
                    memo.view(market)
                    timings.setdefault((written, market), []).append(time.perf_counter() - started)
                for market in markets:
                    for document in ("board", "significance"):
                        url = f"/api/v1/leaderboard/{market}"
                        started = time.perf_counter()
                        response = client.get(url if document == "board" else f"{url}/{document}")
                        assert response.status_code == 200  # noqa: S101
                        took = time.perf_counter() - started
                        timings.setdefault((written, f"API {document} of {market}"), []).append(
                            took
                        )
        client.__exit__(None, None, None)
        engine.dispose()
    for (written, market), values in timings.items():
        what = market if market.startswith("API") else f"view of {market}"
        print(
            f"{what:<25} after a {written} slot: median "
            f"{statistics.median(values) * 1000:.1f} ms, max {max(values) * 1000:.1f} ms "
            f"(n={len(values)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=8, help="hourly slots to ring")
    parser.add_argument("--period-s", type=float, default=4.0, help="real seconds per slot")
    parser.add_argument("--every-ms", type=float, default=10.0, help="ms between requests")
    parser.add_argument("--hold-s", type=float, default=2.5, help="seconds of get_quote a slot")
    parser.add_argument("--views", action="store_true", help="also time the views after a slot")
    parser.add_argument("--view-rounds", type=int, default=5)
    parser.add_argument("--skip-stall", action="store_true")
    parser.add_argument(
        "--compare", action="store_true", help="each part as on main first, then as it is now"
    )
    args = parser.parse_args()
    configure_logging(level="warning", stream=sys.stderr)
    if not args.skip_stall:
        for yielding in (False, True) if args.compare else (True,):
            stall(args.period_s, args.slots, args.every_ms / 1000, args.hold_s, yielding=yielding)
    if args.views:
        modes = ((False, False), (True, False), (True, True)) if args.compare else ((True, True),)
        for per_market, incremental in modes:
            views(args.view_rounds, per_market=per_market, incremental=incremental)


if __name__ == "__main__":
    main()
