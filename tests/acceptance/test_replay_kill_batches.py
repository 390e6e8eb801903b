"""A batched `openbell replay` killed by SIGKILL at random points, then resumed, ends with the
ledger an uninterrupted run leaves, on SQLite and on Postgres.

The real console script replays three months of A-share sessions with every baseline, writing its
ledger in batches of a few slots (`--batch-slots`). The replay is killed once a random number of
cycles is committed (plus a random few milliseconds, so the kill also lands inside a batch's
transaction), resumed with `--resume` and killed again at a later random point, then resumed to
the end. Its ledger is compared with a second, uninterrupted run's, table by table. Left out:
the claim columns of `cycle` (which run held it and when: the killed runs' process ids differ),
and on Postgres the ids, which the replay reserves from the sequences, so a killed run's unused
ids are skipped: there every row is compared with its references (cycle, order, fill, snapshot)
replaced by the natural key of the row they point to. `openbell ledger verify` then passes.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlmodel import SQLModel

import openbell.store.tables  # registers the tables on SQLModel.metadata
from openbell.store.db import make_engine
from openbell_testkit.cli import (
    BASELINE_KINDS,
    TIMEOUT_S,
    clean_env,
    openbell,
    openbell_command,
    write_cn_baselines_config,
)
from openbell_testkit.store import CLAIM_COLUMNS, dump_ledger

# Three months, so that a kill a few milliseconds after its cycles are committed still lands
# before the replay's end (six weeks of the five baselines replay in well under a second now).
START, END = "2025-08-01", "2025-10-31"
SESSIONS = 60  # XSHG sessions from 2025-08-01 through 2025-10-31
CYCLES = SESSIONS * len(BASELINE_KINDS)
BATCH_SLOTS = "3"
LEDGER_TABLES = (
    "agent",
    "account",
    "cycle",
    "order",
    "fill",
    "position",
    "nav_snapshot",
    "nav_mark",
    "corporate_action",
    "trace",
)


def _replay_args(config: Path, *extra: str) -> list[str]:
    return [
        "replay",
        "--config",
        str(config),
        "--start",
        START,
        "--end",
        END,
        "--no-progress",
        "--batch-slots",
        BATCH_SLOTS,
        *extra,
    ]


def _counter(url: str, request: pytest.FixtureRequest) -> Callable[[], int]:
    """How many cycles the ledger at `url` holds now (0 before its schema exists)."""
    # Read-only, so that a poll before the replay made the file does not create it (a file that
    # exists without a schema is one the replay refuses to adopt).
    engine = make_engine(url, read_only=True)
    request.addfinalizer(engine.dispose)

    def count() -> int:
        try:
            with engine.connect() as connection:
                return int(
                    connection.execute(
                        select(func.count()).select_from(SQLModel.metadata.tables["cycle"])
                    ).one()[0]
                )
        except Exception:  # noqa: BLE001  (no schema yet, or a file being created)
            return 0

    return count


def _kill_at(
    tmp_path: Path, args: list[str], cycles: Callable[[], int], at: int, rng: random.Random
) -> int:
    """Run `openbell` with `args`, SIGKILL it once `at` cycles are committed and a random few
    milliseconds more have passed; the cycles committed then."""
    process = subprocess.Popen(
        [*openbell_command(), *args],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline and process.poll() is None and cycles() < at:
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.05))
        ended = process.poll()
        process.send_signal(signal.SIGKILL)
    finally:
        _out, err = process.communicate(timeout=TIMEOUT_S)
    assert ended is None, f"the replay ended (exit {ended}) before the kill: {err}"
    assert process.returncode == -signal.SIGKILL
    return cycles()


def _url(kind: str, tmp_path: Path, name: str, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{(tmp_path / f'{name}.db').as_posix()}"
    url: str = request.getfixturevalue("pg_server").fresh_schema_url()
    return url


def _by_natural_keys(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """The ledger's rows with every id replaced by the natural key of its row (a cycle by its
    account and slot, an order by its cycle and seq, a fill by its order, a snapshot by its
    account, instant and kind, a corporate action by its account, symbol, kind and ex-date),
    sorted; the claim columns left out."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            rows = {
                name: [
                    row._asdict()
                    for row in connection.execute(select(SQLModel.metadata.tables[name]))
                ]
                for name in LEDGER_TABLES
            }
    finally:
        engine.dispose()
    cycles = {row["id"]: (row["account_id"], row["slot_at"]) for row in rows["cycle"]}
    orders = {row["id"]: (cycles[row["cycle_id"]], row["seq"]) for row in rows["order"]}
    fills = {row["id"]: orders[row["order_id"]] for row in rows["fill"]}
    snapshots = {
        row["id"]: (row["account_id"], row["at"], row["kind"]) for row in rows["nav_snapshot"]
    }
    actions = {
        row["id"]: (row["account_id"], row["symbol"], row["kind"], row["ex_date"])
        for row in rows["corporate_action"]
    }
    swaps: dict[str, dict[str, Callable[[Any], Any]]] = {
        "cycle": {},
        "order": {"cycle_id": cycles.__getitem__, "idempotency_key": lambda _key: None},
        "fill": {"order_id": orders.__getitem__, "idempotency_key": lambda _key: None},
        "nav_snapshot": {
            "last_fill_id": lambda found: fills.get(found),
            "last_action_id": lambda found: actions.get(found),
        },
        "nav_mark": {"snapshot_id": snapshots.__getitem__},
        "corporate_action": {"after_fill_id": lambda found: fills.get(found)},
        "trace": {"cycle_id": cycles.__getitem__},
    }
    out: dict[str, list[tuple[Any, ...]]] = {}
    for name, table_rows in rows.items():
        swap = swaps.get(name, {})
        keep_ids = name in {"agent", "account"}  # opened before any kill, in the same order
        out[name] = sorted(
            (
                tuple(
                    (column, swap[column](value) if column in swap else value)
                    for column, value in row.items()
                    if column not in CLAIM_COLUMNS and (keep_ids or column != "id")
                )
                for row in table_rows
            ),
            key=repr,
        )
    return out


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_batched_replay_killed_at_random_points_resumes_to_the_uninterrupted_ledger(
    kind: str, seed: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rng = random.Random(seed)
    cut_url = _url(kind, tmp_path, "cut", request)
    cut = write_cn_baselines_config(tmp_path / "cut.toml", cut_url)
    cycles = _counter(cut_url, request)
    first = rng.randint(1, CYCLES // 3)
    at_first = _kill_at(tmp_path, _replay_args(cut), cycles, first, rng)
    assert first <= at_first < CYCLES
    second = rng.randint(at_first + 1, 2 * CYCLES // 3)
    at_second = _kill_at(tmp_path, _replay_args(cut, "--resume"), cycles, second, rng)
    assert at_first <= at_second < CYCLES
    resumed = openbell(tmp_path, *_replay_args(cut, "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"replayed {SESSIONS} slots" in resumed.stdout
    assert cycles() == CYCLES

    whole_url = _url(kind, tmp_path, "whole", request)
    whole_config = write_cn_baselines_config(tmp_path / "whole.toml", whole_url)
    whole = openbell(tmp_path, *_replay_args(whole_config))
    assert whole.returncode == 0, whole.stderr
    assert f"{CYCLES} cycles done" in whole.stdout

    if kind == "sqlite":  # the file is the replay's own: even the ids are the same
        resumed_dump, whole_dump = dump_ledger(cut_url), dump_ledger(whole_url)
    else:
        resumed_dump, whole_dump = _by_natural_keys(cut_url), _by_natural_keys(whole_url)
    assert whole_dump["fill"]
    assert len(whole_dump["nav_snapshot"]) == 2 * CYCLES  # one per slot, one per close
    for table in whole_dump:
        assert resumed_dump[table] == whole_dump[table], (table, seed, at_first, at_second)

    verified = openbell(tmp_path, "ledger", "verify", "--config", str(cut))
    assert verified.returncode == 0, verified.stdout + verified.stderr
