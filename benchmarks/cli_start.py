"""Start-up time of the `openbell` command line: `openbell --help` and `openbell leaderboard`.

Each figure is the median wall time of `--runs` (default 10) whole processes, started with
`subprocess` and timed from launch to exit: `openbell --help` (target <= 0.5 s) and `openbell
leaderboard --db LEDGER` over the demo's ledger (target <= 1.5 s). The ledger is built once with
`openbell demo --db LEDGER` when the file does not exist yet (about 20 s to a minute); pass `--db`
to keep it between runs. `--compare BIN` times another `openbell` script too (for example the
console script of a checkout of an older version) on the same ledger, alternately with this one,
so both sides see the same machine load. openbell's modules are byte-compiled first, as a regular
`pip install` does: an editable install leaves that to the first import, and an environment with
`PYTHONDONTWRITEBYTECODE` set (as on the machines this was measured on) never writes the cache,
so every process would compile every module again (about 0.1 s). Not a test: run it by hand,
`.venv/bin/python benchmarks/cli_start.py [--runs N] [--db LEDGER] [--compare BIN]`.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

TARGETS_S = {"--help": 0.5, "leaderboard": 1.5}


def default_bin() -> Path:
    """The `openbell` console script installed beside this interpreter."""
    return Path(sys.executable).with_name("openbell")


def wall_s(argv: Sequence[str]) -> float:
    """Seconds from starting `argv` to its exit; a failing command stops the benchmark."""
    began = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603
    return time.perf_counter() - began


def compile_sources() -> None:
    """Byte-compile every module of the installed openbell, as `pip install` does."""
    spec = importlib.util.find_spec("openbell")
    if spec is None or spec.submodule_search_locations is None:
        raise SystemExit("openbell is not installed beside this interpreter")
    for folder in spec.submodule_search_locations:
        compileall.compile_dir(folder, quiet=1)


def build_ledger(openbell: Path, db: Path) -> None:
    """Write the demo's ledger to `db` unless it is there already."""
    if db.exists():
        return
    print(f"building the demo ledger {db} (once)...", flush=True)
    db.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(  # noqa: S603
        [str(openbell), "demo", "--db", str(db)], check=True, stdout=subprocess.DEVNULL
    )


def commands(openbell: Path, db: Path) -> dict[str, list[str]]:
    """The commands timed, by the name their target goes by."""
    return {
        "--help": [str(openbell), "--help"],
        "leaderboard": [str(openbell), "leaderboard", "--db", str(db)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--db", type=Path, help="the demo's ledger (built if missing)")
    parser.add_argument("--bin", type=Path, default=default_bin(), help="the openbell timed")
    parser.add_argument("--compare", type=Path, help="another openbell to time alongside")
    args = parser.parse_args()
    compile_sources()
    with tempfile.TemporaryDirectory(prefix="openbell-cli-start-") as scratch:
        db = args.db or Path(scratch) / "demo.db"
        build_ledger(args.bin, db)
        sides = {"this": args.bin} | ({"compare": args.compare} if args.compare else {})
        runs: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.runs):
            for side, openbell in sides.items():
                for name, argv in commands(openbell, db).items():
                    runs.setdefault((side, name), []).append(wall_s(argv))
    print(f"median of {args.runs} runs, whole process (s):")
    for (side, name), times in runs.items():
        median = statistics.median(times)
        target = TARGETS_S[name]
        verdict = "met" if median <= target else "missed"
        print(
            f"  {side:<8} openbell {name:<12} {median:6.2f}  (min {min(times):.2f}, "
            f"max {max(times):.2f}; target <= {target} s: {verdict})"
        )


if __name__ == "__main__":
    main()
