"""`openbell replay` killed by SIGKILL mid-way, then resumed, ends with the uninterrupted ledger.

The real console script replays six weeks of A-share sessions with every baseline into a fresh
SQLite file, writing its ledger in batches of two slots (`--batch-slots 2`); the test polls the
file until a third of the cycles are committed, kills the process, resumes it with `--resume`,
and compares every table with a second, uninterrupted run: cycles, orders, fills, positions, cash
and NAV snapshots alike. Only the claim bookkeeping (holder, lease, start and finish stamps) may
differ. `openbell ledger verify` then exits 0. A batch writes its cycles finished; only a slot
whose ex-date entries go through the ledger (which writes the batch first, once per account) can
be left with cycles claimed, some or all of its accounts', and the resumed run takes them over.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import openbell.store.tables  # registers the tables on SQLModel.metadata
from openbell_testkit.cli import (
    BASELINE_KINDS,
    TIMEOUT_S,
    clean_env,
    openbell,
    openbell_command,
    write_cn_baselines_config,
)
from openbell_testkit.store import dump_ledger

START, END = "2025-08-01", "2025-09-12"
SESSIONS = 31  # XSHG sessions from 2025-08-01 through 2025-09-12
AGENTS = BASELINE_KINDS
CYCLES = SESSIONS * len(AGENTS)
KILL_AFTER_CYCLES = CYCLES // 3
#: Claim bookkeeping: which run held a cycle and when; the rest of the ledger must be identical.


def _config(workdir: Path, name: str) -> tuple[Path, Path]:
    db = workdir / f"{name}.db"
    return write_cn_baselines_config(workdir / f"{name}.toml", f"sqlite:///{db.as_posix()}"), db


def _replay_args(config: Path, *extra: str) -> list[str]:
    return [
        "replay",
        *("--config", str(config), "--start", START, "--end", END, "--batch-slots", "2"),
        *extra,
    ]


def _cycles(db: Path) -> tuple[int, int]:
    """(cycles, cycles still claimed) in the SQLite file; (0, 0) before its schema exists."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as connection:
            total, claimed = connection.execute(
                "SELECT count(*), coalesce(sum(status = 'claimed'), 0) FROM cycle"
            ).fetchone()
    except sqlite3.Error:
        return 0, 0
    return int(total), int(claimed)


def _claimed_slots(db: Path) -> tuple[list[str], str]:
    """The distinct slots of the cycles still claimed, and the last slot with any cycle."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as connection:
        claimed = [
            str(slot)
            for (slot,) in connection.execute(
                "SELECT DISTINCT slot_at FROM cycle WHERE status = 'claimed'"
            )
        ]
        (last,) = connection.execute("SELECT max(slot_at) FROM cycle").fetchone()
    return claimed, str(last)


def _kill_mid_way(workdir: Path, config: Path, db: Path) -> tuple[int, int]:
    """Start a replay, SIGKILL it once a third of its cycles are committed; (cycles, claimed)
    then."""
    process = subprocess.Popen(
        [*openbell_command(), *_replay_args(config, "--no-progress")],
        cwd=workdir,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline and process.poll() is None:
            total, _claimed = _cycles(db)
            if total >= KILL_AFTER_CYCLES:
                break
            time.sleep(0.01)
        ended = process.poll()
        process.send_signal(signal.SIGKILL)
    finally:
        _out, err = process.communicate(timeout=TIMEOUT_S)
    assert ended is None, f"the replay ended (exit {ended}) before the kill: {err}"
    assert process.returncode == -signal.SIGKILL
    return _cycles(db)


def test_a_killed_replay_resumes_to_the_uninterrupted_ledger(tmp_path: Path) -> None:
    cut_config, cut_db = _config(tmp_path, "cut")
    total, claimed = _kill_mid_way(tmp_path, cut_config, cut_db)
    assert KILL_AFTER_CYCLES <= total < CYCLES
    # None, or cycles of the slot in progress only: at an ex-date each account's entries go
    # through the ledger, which writes the batch first, so the slot's claims are written and then
    # finished one account at a time (a kill between two accounts leaves some of them claimed).
    assert 0 <= claimed <= len(AGENTS)
    if claimed:
        slots, last = _claimed_slots(cut_db)
        assert slots == [last]

    refused = openbell(tmp_path, *_replay_args(cut_config))
    assert refused.returncode == 2
    assert "use --resume or a fresh database" in refused.stderr
    resumed = openbell(tmp_path, *_replay_args(cut_config, "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"replayed {SESSIONS} slots" in resumed.stdout
    assert _cycles(cut_db) == (CYCLES, 0)

    whole_config, whole_db = _config(tmp_path, "whole")
    whole = openbell(tmp_path, *_replay_args(whole_config))
    assert whole.returncode == 0, whole.stderr
    assert f"{CYCLES} cycles done" in whole.stdout

    cut, uninterrupted = dump_ledger(f"sqlite:///{cut_db}"), dump_ledger(f"sqlite:///{whole_db}")
    assert uninterrupted["fill"]
    assert len(uninterrupted["nav_snapshot"]) == 2 * CYCLES  # one per slot, one per close
    for table in uninterrupted:
        assert cut[table] == uninterrupted[table], table

    verified = openbell(tmp_path, "ledger", "verify", "--config", str(cut_config))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("ledger ok:")
