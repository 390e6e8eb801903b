"""Where the CPU of the full replay's slot loop goes, part by part, against another version.

The full replay of `whole_process.py` (`sma_crossover` over the ten coins' daily history, 5,642
slots, into a fresh SQLite ledger) runs in a child process whose parts of the walk
(`daemon/replay._walk`) are each timed with `time.thread_time` around every call: the slot, its
snapshot, the cycle and within it the agent's decision (its moving averages, orders and
`finish`), the toolbox, the slot's NAV snapshot; the session closes' NAV snapshots; the batches'
writes (their inserts, records and hash chain). The parts nest, and the timing itself adds a
little to each. With `--compare-tree DIR` (a folder with another version's `openbell/`, as for
`whole_process.py`) the two versions take turns, `--runs` times each; the script prints each
part's median for both and the median of the runs' ratios (this / other), and checks that the
two wrote the same ledger (`ledger_diff.py`). `--tree DIR` runs this version from such a folder
too (`git archive HEAD ...`), so that both are imported alike. On a shared machine the medians of
a few runs move by several per cent between two runs of the same code: compare a change's parts,
not the totals alone. Not a test: run it by hand,
`.venv/bin/python benchmarks/loop_parts.py [--runs N] [--tree DIR] [--compare-tree DIR]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: The parts timed: label -> (module, owner within it or "", function).
PARTS: dict[str, tuple[str, str, str]] = {
    "walk": ("openbell.daemon.replay", "", "_walk"),
    "- run_slot": ("openbell.daemon.runner", "CycleRunner", "run_slot"),
    "-- snapshot": ("openbell.markets.gateway", "PointInTimeGateway", "snapshot"),
    "-- cycle": ("openbell.daemon.runner", "CycleRunner", "_run_cycle"),
    "--- decision": ("openbell.agents.baselines", "SmaCrossover", "decide"),
    "---- moving averages": (
        "openbell.markets.gateway",
        "PointInTimeGateway",
        "moving_averages_of",
    ),
    "---- orders": ("openbell.agents.toolbox", "Toolbox", "place_order"),
    "---- finish": ("openbell.agents.toolbox", "Toolbox", "finish"),
    "--- toolbox": ("openbell.agents.toolbox", "Toolbox", "__init__"),
    "--- slot NAV": ("openbell.daemon.runner", "", "write_slot_snapshot"),
    "- close NAVs": ("openbell.daemon.runner", "CycleRunner", "write_close_snapshots"),
    "- batch writes": ("openbell.store.replay_ledger", "ReplayLedger", "_write_batch"),
    "-- inserts": ("openbell.store.replay_batch", "", "insert_rows"),
    "-- records": ("openbell.store.replay_batch", "", "cycle_records"),
    "-- hash chain": ("openbell.store.replay_batch", "", "link_rows"),
}


def _timed(function: Callable[..., Any], label: str, spent: dict[str, float]) -> Callable[..., Any]:
    """`function` (a coroutine function or a plain one), adding its thread CPU to `spent`."""
    if asyncio.iscoroutinefunction(function):

        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            began = time.thread_time()
            try:
                return await function(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.thread_time() - began

        return timed_async

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.thread_time() - began

    return timed


def child(db: Path) -> None:
    """Run the full replay into `db`, timing its parts; print them as JSON."""
    import importlib

    sys.path.insert(0, str(HERE))
    from whole_process import FULL_CONFIG, FULL_WINDOW

    from openbell.ops.config.schema import load_config
    from openbell.ops.logs.rendering import configure_logging
    from openbell.ops.wiring.planning import replay_from_config

    configure_logging(level="error", stream=sys.stderr)
    spent: dict[str, float] = {}
    for label, (module_name, owner_name, name) in PARTS.items():
        module = importlib.import_module(module_name)
        owner = getattr(module, owner_name) if owner_name else module
        setattr(owner, name, _timed(getattr(owner, name), label, spent))
    config_path = db.with_suffix(".toml")
    config_path.write_text(FULL_CONFIG.format(db=db.as_posix()))
    start, end = (date.fromisoformat(day) for day in FULL_WINDOW)
    began = time.process_time()
    replay_from_config(
        load_config(config_path),
        start=start,
        end=end,
        market="crypto",
        resume=False,
        show_progress=False,
    )
    print(json.dumps({"replay (CPU)": time.process_time() - began, **spent}))


def run_child(db: Path, tree: Path | None) -> dict[str, float]:
    for path in db.parent.glob(f"{db.name}*"):
        path.unlink()
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    done = subprocess.run(  # noqa: S603
        [sys.executable, __file__, "--child", str(db)],
        check=True,
        env=env,
        capture_output=True,
        text=True,
    )
    found: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--compare-tree", type=Path, help="a folder with another version's openbell/ to time too"
    )
    parser.add_argument("--tree", type=Path, help="a folder with this version's openbell/")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return
    versions: dict[str, Path | None] = {"this": None if args.tree is None else args.tree.resolve()}
    if args.compare_tree is not None:
        versions["other"] = args.compare_tree.resolve()
    runs: dict[str, list[dict[str, float]]] = {version: [] for version in versions}
    with tempfile.TemporaryDirectory(prefix="openbell-loop-parts-") as scratch:
        for _ in range(args.runs):
            for version, tree in versions.items():
                runs[version].append(run_child(Path(scratch) / f"{version}.db", tree))
        if "other" in versions:
            diff = [sys.executable, str(HERE / "ledger_diff.py")]
            ledgers = [str(Path(scratch) / f"{version}.db") for version in versions]
            subprocess.run([*diff, *ledgers], check=False)  # noqa: S603
    for label in ["replay (CPU)", *PARTS]:
        this = [found[label] for found in runs["this"]]
        line = f"{label:<22} this {statistics.median(this):6.3f} s"
        if "other" in runs:
            other = [found[label] for found in runs["other"]]
            ratio = statistics.median(a / b for a, b in zip(this, other, strict=True))
            line += f"   other {statistics.median(other):6.3f} s   this / other {ratio:.2f}"
        print(line)


if __name__ == "__main__":
    main()
