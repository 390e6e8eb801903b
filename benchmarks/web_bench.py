"""The web arena's latency over a 50-agent, one-year ledger, and the daemon's cycles while polled.

The ledger is `web_ledger.py`'s (built once and cached; 50 agents, a year of daily crypto slots
and ten sessions of US hours), copied into a temp dir and upgraded to the schema head.

1. Latency: `openbell serve --db COPY --listen 127.0.0.1:0` in a child process (the real
   Starlette app on uvicorn), and one keep-alive httpx client in this process sending sequential
   GETs: for each URL a first request (timed apart: what a request costs when nothing is cached),
   `--warmup` requests (not counted), then `--requests` timed ones, or fewer (at least 10) once
   they took `--budget-s`; median and p99 in ms (target: under 100 ms).
2. Cycles while a page is polled: the A-share daily replay (`web_ledger.CN`, `--slots` slots) with
   the same 50 agents into the copy, run by the replay driver on one event loop that also serves
   the web routes over the same ledger with `daemon.http.serve_http`, as the daemon serves them
   next to its cycles (`ops.web.app.web_parts`: the market views computed in a worker process;
   `--in-process-views`: in the server's thread pool, as before that worker). A child process
   polls the arena page `/` over loopback, in blocks of `--block` slots: not at all, once a
   second, then as fast as it can (one request after the other), and again. Each slot's wall
   time (between the driver's progress calls) counts for the block it ran in, but for each
   block's first slot (the replay's cold first slot, or one a page request from the block before
   may still run into). Median and p99 per condition, and their ratios to the unpolled slots
   (target: about 1.0). The page is polled flat out only to find
   the worst case: a browser's page polls `/live/stamp` and reloads once a slot.

Not a test: run it by hand, `.venv/bin/python benchmarks/web_bench.py [--requests N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing as mp
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

import httpx
from web_ledger import CN, LEDGER_WINDOWS, cached_ledger, config, llm_agents

from openbell.daemon.http import serve_http
from openbell.daemon.replay import _replay  # the driver's coroutine, to share its loop
from openbell.markets.replay_source import ReplaySource
from openbell.markets.slots import replay_slots
from openbell.ops.logs.rendering import configure_logging
from openbell.ops.web.app import web_parts
from openbell.ops.wiring.planning import replay_plan
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade

OPENBELL = Path(sys.executable).parent / "openbell"
#: Polling modes of the cycle run, in the order the blocks take them: seconds between requests
#: (None: no polling; 0: one request after the other).
MODES: tuple[tuple[str, float | None], ...] = (("unpolled", None), ("1 s", 1.0), ("flat out", 0.0))


def percentile(values: list[float], share: float) -> float:
    """The `share` quantile of `values` (inclusive method: p99 of 200 lies between the top two)."""
    return statistics.quantiles(values, n=100, method="inclusive")[round(share * 100) - 1]


def figures(values: list[float]) -> str:
    return (
        f"median {statistics.median(values) * 1000:6.1f} ms, p99 "
        f"{percentile(values, 0.99) * 1000:6.1f} ms (n={len(values)})"
    )


# -- 1. latency ---------------------------------------------------------------------------------


def start_serve(db: Path) -> tuple[subprocess.Popen[str], str]:
    """`openbell serve` over `db` on a free loopback port; the process and its base URL."""
    process = subprocess.Popen(  # noqa: S603
        [
            str(OPENBELL),
            "--log-format",
            "json",
            "serve",
            "--db",
            str(db),
            "--listen",
            "127.0.0.1:0",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    for line in process.stderr or ():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("event") == "serving":
            return process, str(event["url"])
    process.wait()
    raise SystemExit(f"openbell serve exited with {process.returncode} before serving")


def time_get(
    client: httpx.Client, url: str, warmup: int, requests: int, budget_s: float
) -> list[float]:
    """Wall times of `requests` sequential GETs of `url`, after `warmup` untimed ones; fewer (at
    least 10) when the timed ones have taken `budget_s`."""
    timings: list[float] = []
    for index in range(warmup + requests):
        if len(timings) >= 10 and sum(timings) > budget_s:
            break
        started = time.perf_counter()
        response = client.get(url)
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise SystemExit(f"GET {url}: {response.status_code} {response.text[:200]}")
        if index >= warmup:
            timings.append(elapsed)
    return timings


def last_llm_cycle(db: Path) -> int:
    """The id of llm-1's latest crypto cycle (a trace of eleven entries and an order)."""
    with sqlite3.connect(db) as connection:
        row = connection.execute(
            "SELECT c.id FROM cycle c JOIN account a ON a.id = c.account_id "
            "JOIN agent g ON g.id = a.agent_id WHERE g.name = 'llm-1' AND a.market = 'crypto' "
            "ORDER BY c.slot_at DESC LIMIT 1"
        ).fetchone()
    return int(row[0])


def latency(db: Path, paths: list[str], warmup: int, requests: int, budget_s: float) -> None:
    process, base = start_serve(db)
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            for path in paths:
                started = time.perf_counter()
                size = len(client.get(path).content)
                first = time.perf_counter() - started
                timings = time_get(client, path, warmup, requests, budget_s)
                print(
                    f"GET {path:<36} {figures(timings)}; first {first * 1000:.0f} ms; "
                    f"{size / 1024:.0f} KiB"
                )
    finally:
        process.terminate()
        process.wait(timeout=30)


# -- 2. cycles while polled ---------------------------------------------------------------------


def poller(
    base: str, path: str, interval: Synchronized[float], ready: Any, stop: Any, done: Any, out: Any
) -> None:
    """Child process: GET `path` once and set `ready`; then GET it while `interval` >= 0 (0: back
    to back), counting into `done`, until `stop`; each request's (interval, seconds) go to `out`
    at the end."""
    timings: list[tuple[float, float]] = []
    with httpx.Client(base_url=base, timeout=900) as client:
        client.get(path).raise_for_status()
        ready.set()
        while not stop.is_set():
            wait = interval.value
            if wait < 0:
                time.sleep(0.01)
                continue
            started = time.perf_counter()
            client.get(path).raise_for_status()
            elapsed = time.perf_counter() - started
            with done.get_lock():
                done.value += 1
            timings.append((wait, elapsed))
            time.sleep(max(0.0, wait - elapsed))
    out.put(timings)


async def loop_lag(lags: list[tuple[str, float]], mode: list[str]) -> None:
    """How late a 10 ms sleep of the event loop wakes, while the replay runs, by polling mode."""
    while True:
        started = time.perf_counter()
        await asyncio.sleep(0.01)
        lags.append((mode[0], time.perf_counter() - started - 0.01))


async def polled_replay(db: Path, slots: int, block: int, path: str, *, worker: bool) -> None:
    url = f"sqlite:///{db.as_posix()}"
    plan, _ = replay_plan(
        config(db, (*LEDGER_WINDOWS, CN)),
        start=CN.start,
        end=CN.end,
        market="cn",
        resume=False,
        allow_outside_coverage=True,
        allow_partial_coverage=True,  # the SSE-50 index's bundled bars end on 2025-11-07
    )
    (market,) = plan.markets
    if not isinstance(market.source, ReplaySource):
        raise TypeError("a replay plan's source is a ReplaySource")
    ahead = replay_slots(market.source, "cn", "1d", plan.start_at, plan.end_at)
    if slots >= len(ahead):
        raise SystemExit(f"--slots must be below {len(ahead)}: the bundled A-share days")
    market = replace(market, agents=market.agents + llm_agents(CN.symbol))
    plan = replace(plan, markets=(market,), end_at=ahead[slots], migrate=False)
    upgrade(url)  # the new accounts' market needs nothing more; the schema is at the head

    engine = make_engine(url)  # one engine for the cycles and the pages, as the daemon has
    parts = web_parts(engine, worker=worker)
    server = await serve_http("127.0.0.1", 0, routes=parts.routes, lifespans=parts.lifespans)
    context = mp.get_context("spawn")
    interval: Synchronized[float] = context.Value("d", -1.0)
    done: Synchronized[int] = context.Value("i", 0)
    ready, stop, out = context.Event(), context.Event(), context.Queue()
    child = context.Process(
        target=poller, args=(server.url, path, interval, ready, stop, done, out)
    )
    child.start()
    if not await asyncio.to_thread(ready.wait, 300):
        raise SystemExit(f"the poller could not GET {path}")
    marks: list[tuple[float, str, int]] = []
    current = [MODES[0][0]]
    lags: list[tuple[str, float]] = []

    def progress(finished: int, _total: int) -> None:
        mode, wait = MODES[(finished // block) % len(MODES)]
        interval.value = -1.0 if wait is None else wait
        current[0] = mode
        marks.append((time.perf_counter(), mode, done.value))

    probe = asyncio.get_running_loop().create_task(loop_lag(lags, current))
    try:
        counts = await _replay(plan, Ledger(engine), progress)
    finally:
        probe.cancel()
        stop.set()
        # Off the loop: the poller's request in flight needs the loop to be answered.
        requests = await asyncio.to_thread(out.get, timeout=900)
        await asyncio.to_thread(child.join, 60)
        await server.close()
        engine.dispose()
    print(f"replayed cn daily, {counts.slots} slots x 50 agents, {counts.fills} fills")
    by_mode: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
    polls: dict[str, int] = dict.fromkeys(by_mode, 0)
    for index, ((start, mode, before), (end, _, after)) in enumerate(itertools.pairwise(marks)):
        if index % block == 0:  # a block's first slot: the cold one, or a request from before
            continue
        by_mode[mode].append(end - start)
        polls[mode] += after - before
    base = statistics.median(by_mode["unpolled"])
    for mode, times in by_mode.items():
        seconds = sum(times)
        print(
            f"slot wall time, {mode:<8}: median {statistics.median(times):.3f} s, p99 "
            f"{percentile(times, 0.99):.3f} s (n={len(times)}), median ratio "
            f"{statistics.median(times) / base:.2f}; {polls[mode]} page loads, "
            f"{polls[mode] / seconds:.1f}/s"
        )
    for mode, wait in MODES:
        lag = [late for at, late in lags if at == mode]
        print(
            f"event loop lag, {mode:<8}: median {statistics.median(lag) * 1000:.1f} ms, p99 "
            f"{percentile(lag, 0.99) * 1000:.0f} ms, max {max(lag) * 1000:.0f} ms"
        )
        served = [seconds for asked, seconds in requests if asked == wait]
        if len(served) >= 2:
            print(
                f"GET {path} while cycles run, {mode}: {figures(served)}, max {max(served):.1f} s"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=60, help="timed seconds per URL")
    parser.add_argument("--slots", type=int, default=90, help="A-share slots to replay")
    parser.add_argument("--block", type=int, default=6, help="slots per polling block")
    parser.add_argument("--poll", default="/", help="the page polled while cycles run")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-cycles", action="store_true")
    parser.add_argument(
        "--in-process-views",
        action="store_true",
        help="cycles part: compute the market views in the server's threads, not a worker",
    )
    args = parser.parse_args()
    configure_logging(level="warning", stream=sys.stderr)
    ledger = cached_ledger()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        shutil.copyfile(ledger, db)
        upgrade(f"sqlite:///{db.as_posix()}")
        if not args.skip_latency:
            paths = [
                "/",
                "/markets/crypto/agents/llm-1",
                "/markets/us/agents/random-01",
                f"/cycles/{last_llm_cycle(db)}",
                "/live/stamp",
                "/api/v1/leaderboard/us",
                "/api/v1/leaderboard/crypto",
                "/api/v1/agents/random-01/crypto/nav",
            ]
            latency(db, paths, args.warmup, args.requests, args.budget_s)
        if not args.skip_cycles:
            asyncio.run(
                polled_replay(
                    db, args.slots, args.block, args.poll, worker=not args.in_process_views
                )
            )


if __name__ == "__main__":
    main()
