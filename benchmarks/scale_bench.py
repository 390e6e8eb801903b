"""Scale of a replay: 100 symbols, hourly, 20 baseline agents, a year of slots; wall time and RSS.

What is measured (issue 14, target 2): a replay of the US market at the hourly cadence over the
sessions of 2024 (1,755 slots, the half days shorter), 100 synthetic stocks plus the benchmark QQQ,
with 20 agents, four of each rule baseline (`buy_and_hold`, `equal_weight`, `sma_crossover`,
`cash`, `random` with seeds 1-4), so 35,100 cycles, written into a fresh SQLite ledger. The bars
are a seeded random walk (`synthetic_bars.py`), generated into a temporary folder before the first
run (hourly bars for 2024, daily bars from 2023 so that SMA(200) has its history) and read by a
`replay:PATH` source, as `openbell replay` reads any bar files. Each run is a child process (a
fresh interpreter, set up as the `openbell` command sets up its own: what one `openbell replay`
costs), which prints:

- the wall time of the replay and its cycles per second;
- its peak RSS (the kernel's high-water mark, `VmHWM` of /proc/self/status), target <= 400 MB;
- the RSS soak: the resident set (`VmRSS`) sampled after the warm-up (the first `--warmup-cycles`
  cycles, 10,000 by default: the bar files read, the agents' first trades made, and the replay
  source's blocks of `Bar`s grown to their cap, about four months of hourly bars per symbol) and at
  the end, with at least 10,000 cycles between the two (the rest of the year: 25,100); the target
  is a flat RSS, read here as growth under `FLAT_MB` MB. The samples in between (after 2,000
  cycles, then every tenth of the slots) are printed too, so the warm-up's own growth shows.

The parent prints each run's figures, then the medians over `--runs` runs. With `--tracemalloc`
the child traces Python allocations from the warm-up sample on and prints the 15 source lines whose
allocations grew most by the end (tracing slows the run about twofold; use it to find a leak).
Not a test: run it by hand, `.venv/bin/python benchmarks/scale_bench.py [--runs 3]`. Linux only
(it reads /proc). `--start`/`--end` shorten the window (the soak then has fewer cycles).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import date
from pathlib import Path
from typing import Any

SYMBOLS = tuple(f"S{n:03d}" for n in range(100))
BENCHMARK = "QQQ"
KINDS = ("buy_and_hold", "equal_weight", "sma_crossover", "cash", "random")
AGENTS_PER_KIND = 4
WARMUP_CYCLES = 10_000
SOAK_CYCLES = 10_000
#: An early sample, to show how much of the RSS the first cycles add.
EARLY_CYCLES = 2_000
#: RSS growth over the soak below which it counts as flat.
FLAT_MB = 20.0
PEAK_TARGET_MB = 400.0


def config_text(db: Path, bars: Path) -> str:
    """The run's `openbell.toml`: the US market over the synthetic bars, 20 baseline agents."""
    agents = "".join(
        f'\n[[agents]]\nname = "{kind.replace("_", "-")}-{n}"\nkind = "{kind}"\nmarkets = ["us"]\n'
        + (f"seed = {n}\n" if kind == "random" else "")
        for kind in KINDS
        for n in range(1, AGENTS_PER_KIND + 1)
    )
    universe = ", ".join(f'"{symbol}"' for symbol in SYMBOLS)
    return f"""
[store]
url = "sqlite:///{db.as_posix()}"

[markets.us]
universe = [{universe}]
cadence = "hourly"
source = "replay:{bars.as_posix()}"
initial_cash = "1000000"
{agents}"""


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def rss_mb() -> float:
    """The resident set of this process now, in MB."""
    return _status_kb("VmRSS") / 1024


def peak_rss_mb() -> float:
    """The high-water mark of this process's resident set, in MB."""
    return _status_kb("VmHWM") / 1024


class Sampler:
    """The replay's progress callback: RSS after the warm-up and every tenth of the slots."""

    def __init__(self, agents: int, warmup_cycles: int, trace: bool) -> None:
        self.agents = agents
        self.warmup_cycles = warmup_cycles
        self.trace = trace
        self.samples: list[dict[str, float]] = []
        self.warm: dict[str, float] | None = None
        self.snapshot: tracemalloc.Snapshot | None = None
        self.started_s = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        cycles = done * self.agents
        every = max(total // 10, 1)
        if cycles >= EARLY_CYCLES and not any(s["cycles"] >= EARLY_CYCLES for s in self.samples):
            self._sample(cycles)
        if self.warm is None and cycles >= self.warmup_cycles:
            self.warm = self._sample(cycles)
            if self.trace:
                tracemalloc.start(5)
                self.snapshot = tracemalloc.take_snapshot()
        elif done % every == 0 or done == total:
            self._sample(cycles)

    def _sample(self, cycles: int) -> dict[str, float]:
        sample = {
            "cycles": cycles,
            "rss_mb": rss_mb(),
            "elapsed_s": time.perf_counter() - self.started_s,
        }
        self.samples.append(sample)
        print(  # progress on stderr, which the parent passes through
            f"  {cycles} cycles: RSS {sample['rss_mb']:.0f} MB at {sample['elapsed_s']:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        return sample

    def growth(self) -> list[str]:
        """The 15 source lines whose traced allocations grew most since the warm-up."""
        if self.snapshot is None:
            return []
        stats = tracemalloc.take_snapshot().compare_to(self.snapshot, "lineno")
        return [str(stat) for stat in stats[:15]]


def child(config_path: str, start: str, end: str, warmup_cycles: int, trace: bool) -> None:
    """One replay in this process, set up as the `openbell` command sets up its process (the
    malloc arena cap, before anything starts a thread); its figures as one JSON line on stdout."""
    from openbell.ops.entry import limit_malloc_arenas

    limit_malloc_arenas()
    from openbell.daemon.replay import run_replay
    from openbell.ops.config.schema import load_config
    from openbell.ops.logs.rendering import configure_logging
    from openbell.ops.wiring.planning import replay_plan

    configure_logging(level="warning", stream=sys.stderr)
    config = load_config(config_path)
    agents = len(config.agents)
    plan, _ = replay_plan(
        config,
        start=date.fromisoformat(start),
        end=date.fromisoformat(end),
        market="us",
        resume=False,
    )
    sampler = Sampler(agents, warmup_cycles, trace)
    started_s = time.perf_counter()
    report = run_replay(plan, progress=sampler)
    wall_s = time.perf_counter() - started_s
    end_sample = sampler.samples[-1]
    print(
        json.dumps(
            {
                "slots": report.slots,
                "cycles": report.cycles_done,
                "failed": report.cycles_failed + report.cycles_skipped,
                "fills": report.fills,
                "wall_s": wall_s,
                "peak_mb": peak_rss_mb(),
                "warm": sampler.warm or sampler.samples[0],
                "end": end_sample,
                "samples": sampler.samples,
                "growth": sampler.growth(),
            }
        )
    )


def run_once(workdir: Path, bars: Path, run: int, args: argparse.Namespace) -> dict[str, Any]:
    db = workdir / f"scale-{run}.db"
    config_path = workdir / f"scale-{run}.toml"
    config_path.write_text(config_text(db, bars))
    command = [sys.executable, __file__, "--child", str(config_path)]
    command += ["--start", args.start, "--end", args.end]
    command += ["--warmup-cycles", str(args.warmup_cycles)]
    if args.tracemalloc:
        command.append("--tracemalloc")
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)  # noqa: S603
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return figures


def describe(run: int, figures: dict[str, Any]) -> str:
    warm, end = figures["warm"], figures["end"]
    soak = end["cycles"] - warm["cycles"]
    growth = end["rss_mb"] - warm["rss_mb"]
    rate = figures["cycles"] / figures["wall_s"]
    lines = [
        (
            f"run {run}: {figures['slots']} slots, {figures['cycles']} cycles done "
            f"({figures['failed']} failed or skipped), {figures['fills']} fills in "
            f"{figures['wall_s']:.1f} s ({rate:.0f} cycles/s); peak RSS {figures['peak_mb']:.0f} "
            f"MB; RSS {warm['rss_mb']:.1f} MB after {warm['cycles']} cycles, "
            f"{end['rss_mb']:.1f} MB after {end['cycles']} ({growth:+.1f} MB over {soak} cycles)"
        ),
        "  RSS samples (cycles: MB): "
        + ", ".join(f"{s['cycles']}: {s['rss_mb']:.0f}" for s in figures["samples"]),
    ]
    if figures["growth"]:
        lines.append("  allocations grown most since the warm-up (tracemalloc):")
        lines.extend(f"    {line}" for line in figures["growth"])
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--start", default="2024-01-01")
    parser.add_argument("--end", default="2024-12-31")
    parser.add_argument("--warmup-cycles", type=int, default=WARMUP_CYCLES)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--child", metavar="CONFIG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.start, args.end, args.warmup_cycles, args.tracemalloc)
        return
    from synthetic_bars import write_walk  # numpy and pyarrow: not before the child's set-up

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        bars = workdir / "bars"
        bars.mkdir()
        started_s = time.perf_counter()
        replay_start = date.fromisoformat(args.start)
        write_walk(
            bars,
            market="us",
            symbols=(*SYMBOLS, BENCHMARK),
            daily_from=date(replay_start.year - 1, 1, 1),
            hourly_from=replay_start,
            end=date.fromisoformat(args.end),
        )
        print(f"synthetic bars written in {time.perf_counter() - started_s:.1f} s", flush=True)
        runs = [run_once(workdir, bars, run, args) for run in range(args.runs)]
    for run, figures in enumerate(runs, 1):
        print(describe(run, figures), flush=True)
    wall = statistics.median(f["wall_s"] for f in runs)
    peak = statistics.median(f["peak_mb"] for f in runs)
    growth = statistics.median(f["end"]["rss_mb"] - f["warm"]["rss_mb"] for f in runs)
    soak = min(f["end"]["cycles"] - f["warm"]["cycles"] for f in runs)
    cycles = runs[0]["cycles"]
    print(
        f"US hourly replay, {len(SYMBOLS)} symbols + {BENCHMARK}, "
        f"{len(KINDS) * AGENTS_PER_KIND} baseline agents, {args.start}..{args.end}: "
        f"{runs[0]['slots']} slots, {cycles} cycles; medians of {len(runs)} runs: wall "
        f"{wall:.1f} s ({cycles / wall:.0f} cycles/s), peak RSS {peak:.0f} MB "
        f"(target <= {PEAK_TARGET_MB:.0f}: {'met' if peak <= PEAK_TARGET_MB else 'MISSED'}), "
        f"RSS growth over the soak {growth:+.1f} MB over {soak} cycles (flat: under "
        f"{FLAT_MB:.0f} MB over >= {SOAK_CYCLES}: "
        f"{'met' if growth < FLAT_MB and soak >= SOAK_CYCLES else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
