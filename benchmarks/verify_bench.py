"""Verifying a big ledger, and how soon a daemon on it tells systemd READY (issue 30, item 2).

The ledger: a year of US hourly slots (2024, 1,755 slots) replayed with 15 baseline agents (three
of each rule baseline: `buy_and_hold`, `equal_weight`, `sma_crossover`, `cash`, `random` with
seeds 1-3) over 20 synthetic stocks plus the benchmark QQQ (a seeded random walk,
`synthetic_bars.py`): 26,325 cycles with their slot and close NAV snapshots and fills. It is built
once by `openbell replay` and kept for later runs: the SQLite file in a folder under the system's
temporary folder (`--cache`), the Postgres ledger in a schema of the `--postgres` database; both
are named after the schema head and the recipe, so a changed schema builds them anew.

For each engine it prints the median over `--runs` runs of (each command a fresh process, its
wall time and its own CPU time, which the machine's other load does not inflate):

- a full verify, `openbell ledger verify --full` (the command's wall time, a fresh process);
- an incremental verify, `openbell ledger verify` from the checkpoints the daemon's last start
  stored (the integrity check, and the few rows written since: the missed slots it recorded);
- the time from `openbell run` starting to its `READY=1` on the `NOTIFY_SOCKET` this script
  listens on (a datagram socket in a temporary folder), the daemon enrolling the same agents on a
  fake clock just after the ledger's last slot, and how much of it was the start-up verification
  (its `ledger_verified` line); the daemon is stopped with SIGTERM once ready. The first start
  (no checkpoint yet, or those of an earlier run) is printed on its own.

Targets: full verify <= 10 s on both engines, READY within 10 s. Not a test: run it by hand,
`.venv/bin/python benchmarks/verify_bench.py [--runs 3] [--postgres URL] [--skip-sqlite]`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

SYMBOLS = tuple(f"S{n:03d}" for n in range(20))
BENCHMARK = "QQQ"
KINDS = ("buy_and_hold", "equal_weight", "sma_crossover", "cash", "random")
AGENTS_PER_KIND = 3
START = date(2024, 1, 1)
END = date(2024, 12, 31)
#: The fake clock the daemon starts on: the first Monday after the ledger's last slot, before the
#: open (its start-up recovery then has nothing to catch up within the grace).
DAEMON_CLOCK = "2025-01-06T12:00:00Z"
READY_WITHIN_S = 120.0
#: A change here builds the cached ledgers anew.
RECIPE = f"{SYMBOLS}{BENCHMARK}{KINDS}{AGENTS_PER_KIND}{START}{END}"


def openbell_command() -> list[str]:
    """The `openbell` console script beside this interpreter."""
    script = shutil.which("openbell", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "openbell.ops.cli"]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"OPENBELL_CONFIG", "NOTIFY_SOCKET"}}
    env["OPENBELL_OFFLINE"] = "1"
    return env


def config_text(url: str, bars: Path) -> str:
    """The run's `openbell.toml`: the US market hourly over the synthetic bars, 15 baselines."""
    agents = "".join(
        f'\n[[agents]]\nname = "{kind.replace("_", "-")}-{n}"\nkind = "{kind}"\nmarkets = ["us"]\n'
        + (f"seed = {n}\n" if kind == "random" else "")
        for kind in KINDS
        for n in range(1, AGENTS_PER_KIND + 1)
    )
    universe = ", ".join(f'"{symbol}"' for symbol in SYMBOLS)
    return f"""
[store]
url = "{url}"

[markets.us]
universe = [{universe}]
cadence = "hourly"
source = "replay:{bars.as_posix()}"
initial_cash = "1000000"
{agents}"""


def cache_key() -> str:
    from openbell.store.db import shipped_head

    return hashlib.sha256(f"{shipped_head()}{RECIPE}".encode()).hexdigest()[:12]


def ensure_bars(folder: Path) -> Path:
    bars = folder / "bars"
    done = bars / ".done"
    if not done.exists():
        from synthetic_bars import write_walk

        bars.mkdir(parents=True, exist_ok=True)
        write_walk(
            bars,
            market="us",
            symbols=(*SYMBOLS, BENCHMARK),
            daily_from=date(START.year - 1, 1, 1),
            hourly_from=START,
            end=END,
        )
        done.touch()
    return bars


def ensure_ledger(folder: Path, url: str, bars: Path, name: str) -> Path:
    """Replay the year into `url` unless a replay already finished there; the config's path."""
    config = folder / f"{name}.toml"
    config.write_text(config_text(url, bars), encoding="utf-8")
    done = folder / f"{name}.done"
    if done.exists():
        return config
    print(
        f"building the {name} ledger (a replay of {len(KINDS) * AGENTS_PER_KIND} agents "
        f"over {START}..{END})",
        file=sys.stderr,
        flush=True,
    )
    started_s = time.perf_counter()
    subprocess.run(  # noqa: S603
        [
            *openbell_command(),
            "replay",
            "--config",
            str(config),
            "--market",
            "us",
            "--start",
            START.isoformat(),
            "--end",
            END.isoformat(),
            "--no-progress",
        ],
        check=True,
        env=environment(),
        cwd=folder,
        stdout=subprocess.DEVNULL,
    )
    print(f"  built in {time.perf_counter() - started_s:.0f} s", file=sys.stderr, flush=True)
    done.touch()
    return config


def postgres_schema_url(url: str, schema: str, *, fresh: bool) -> str:
    """`url` with its search path in `schema` (created; dropped first when `fresh`)."""
    import psycopg
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    conninfo = parsed.set(drivername="postgresql", query={}).render_as_string(False)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        if fresh:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    return (
        parsed.set(drivername="postgresql+psycopg")
        .update_query_dict({"options": f"-csearch_path={schema}"})
        .render_as_string(hide_password=False)
    )


def timed(config: Path, *args: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, the child's own: what the machine's other
    load does not inflate) of one `openbell ... --config config` command that must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started_s = time.perf_counter()
    done = subprocess.run(  # noqa: S603
        [*openbell_command(), *args, "--config", str(config)],
        env=environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started_s
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if done.returncode != 0:
        raise RuntimeError(f"openbell {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    print(
        f"  openbell {' '.join(args)}: {seconds:.2f} s (CPU {cpu_s:.2f} s): {done.stdout.strip()}",
        file=sys.stderr,
    )
    return seconds, cpu_s


def time_to_ready(config: Path, folder: Path) -> tuple[float, float]:
    """Seconds from starting `openbell run` to its READY=1 on a socket this process listens on,
    and the seconds its start-up verification took (its `ledger_verified` line)."""
    path = folder / "notify.sock"
    path.unlink(missing_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(0.5)
        env = environment()
        env["NOTIFY_SOCKET"] = str(path)
        started_s = time.perf_counter()
        daemon = subprocess.Popen(  # noqa: S603
            [
                *openbell_command(),
                "run",
                "--config",
                str(config),
                "--fake-clock",
                DAEMON_CLOCK,
                "--stop-grace-s",
                "0",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            while True:
                if time.perf_counter() - started_s > READY_WITHIN_S:
                    raise RuntimeError(f"no READY=1 within {READY_WITHIN_S} s")
                if daemon.poll() is not None:
                    raise RuntimeError(f"openbell run ended, exit {daemon.returncode}")
                try:
                    message = sock.recv(4096).decode()
                except TimeoutError:
                    continue
                if "READY=1" in message.splitlines():
                    seconds = time.perf_counter() - started_s
                    break
        finally:
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
            try:
                logged, _ = daemon.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                daemon.kill()
                logged, _ = daemon.communicate()
    verified = [json.loads(line) for line in logged.splitlines() if '"ledger_verified"' in line]
    verify_s = float(verified[0]["seconds"]) if verified else float("nan")
    print(
        f"  openbell run: READY after {seconds:.2f} s (its verification {verify_s:.2f} s)",
        file=sys.stderr,
    )
    return seconds, verify_s


def measure(name: str, config: Path, folder: Path, runs: int) -> None:
    full: list[float] = []
    incremental: list[float] = []
    ready: list[float] = []
    # The first start finds no checkpoint (or those of an earlier run of this script) and stores
    # them; the starts measured below go on from the previous one's.
    first, first_verify = time_to_ready(config, folder)
    print(
        f"{name}: first start to READY {first:.2f} s, its verification {first_verify:.2f} s "
        "(it stores the checkpoints)",
        flush=True,
    )
    startup_verify: list[float] = []
    full_cpu: list[float] = []
    incremental_cpu: list[float] = []
    for _ in range(runs):
        seconds, cpu_s = timed(config, "ledger", "verify", "--full")
        full.append(seconds)
        full_cpu.append(cpu_s)
        seconds, cpu_s = timed(config, "ledger", "verify")
        incremental.append(seconds)
        incremental_cpu.append(cpu_s)
        to_ready, verify_s = time_to_ready(config, folder)
        ready.append(to_ready)
        startup_verify.append(verify_s)
    print(
        f"{name}: full verify {statistics.median(full):.2f} s (CPU "
        f"{statistics.median(full_cpu):.2f} s), incremental verify "
        f"{statistics.median(incremental):.2f} s (CPU {statistics.median(incremental_cpu):.2f} s), "
        "start to READY "
        f"{statistics.median(ready):.2f} s, of which its verification "
        f"{statistics.median(startup_verify):.2f} s (medians of {runs}; "
        f"full {', '.join(f'{s:.2f}' for s in full)})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", metavar="URL", help="also measure a Postgres ledger here")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "openbell-verify-bench",
        help="folder that keeps the bars and the SQLite ledger between runs",
    )
    parser.add_argument("--build-only", action="store_true", help="build the ledgers and stop")
    args = parser.parse_args()
    key = cache_key()
    folder = args.cache / key
    folder.mkdir(parents=True, exist_ok=True)
    bars = ensure_bars(args.cache)
    configs: list[tuple[str, Path]] = []
    if not args.skip_sqlite:
        url = f"sqlite:///{(folder / 'ledger.db').as_posix()}"
        configs.append(("SQLite", ensure_ledger(folder, url, bars, "sqlite")))
    if args.postgres:
        schema = f"verify_bench_{key}"
        fresh = not (folder / "postgres.done").exists()
        url = postgres_schema_url(args.postgres, schema, fresh=fresh)
        configs.append(("Postgres", ensure_ledger(folder, url, bars, "postgres")))
    if args.build_only:
        for name, config in configs:
            print(f"{name}: {config}")
        return
    for name, config in configs:
        measure(name, config, folder, args.runs)


if __name__ == "__main__":
    main()
