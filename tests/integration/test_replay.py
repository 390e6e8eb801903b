"""The replay driver over the bundled bars with every baseline, on real SQLite (and Postgres).

A short A-share replay trades and leaves a ledger that verifies, with a slot snapshot per cycle and
a close snapshot per session; the same replay into two fresh databases leaves identical ledgers;
a second replay of the window is refused without `resume` and changes nothing with it; the heap is
frozen from the end of the first slot on and thawed at the end, unless something else froze it.
"""

from __future__ import annotations

import gc
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from openbell.agents.baselines import BASELINE_KINDS, build_agent
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import plan_events, run_replay
from openbell.markets.domain import utc
from openbell.markets.errors import OperatorError
from openbell.store.db import make_engine
from openbell.store.migrate import upgrade
from openbell.store.verify import verify_ledger
from openbell_testkit.replay import cn_daily, crypto_daily
from openbell_testkit.store import dump_tables

START = utc(2025, 9, 1)
END = utc(2025, 9, 13)  # two weeks of sessions: 2025-09-01 .. 2025-09-12, ten of them
SESSIONS = 10


def _cn_plan(store_url: str, *, resume: bool = False) -> ReplayPlan:
    market = cn_daily(
        *(build_agent(kind, kind.replace("_", "-"), market="cn", seed=7) for kind in BASELINE_KINDS)
    )
    return ReplayPlan(
        store_url=store_url, start_at=START, end_at=END, markets=(market,), resume=resume
    )


def _migrated(url: str) -> str:
    upgrade(url)
    return url


def _verified(engine: Engine) -> str:
    report = verify_ledger(engine)
    assert report.ok, report.lines()
    return report.summary()


def test_a_short_replay_trades_and_its_ledger_verifies(db_url: str) -> None:
    report = run_replay(_cn_plan(_migrated(db_url)))
    agents = len(BASELINE_KINDS)
    assert report.slots == SESSIONS
    assert report.cycles_done == SESSIONS * agents
    assert (report.cycles_failed, report.cycles_skipped, report.cycles_already) == (0, 0, 0)
    assert report.fills > 0
    assert report.close_snapshots == SESSIONS * agents
    engine = make_engine(db_url)
    try:
        summary = _verified(engine)
    finally:
        engine.dispose()
    assert f"{agents} accounts, {report.fills} fills, {2 * SESSIONS * agents} snapshots" in summary


def test_the_same_replay_leaves_the_same_ledger(tmp_path: Path) -> None:
    dumps = []
    for name in ("first", "second"):
        url = _migrated(f"sqlite:///{tmp_path / name}.db")
        run_replay(_cn_plan(url))
        engine = make_engine(url)
        try:
            dumps.append(dump_tables(engine))
        finally:
            engine.dispose()
    assert dumps[0] == dumps[1]
    assert dumps[0]["fill"]


def test_the_heap_is_frozen_after_the_first_slot_and_thawed_at_the_end(sqlite_url: str) -> None:
    assert gc.get_freeze_count() == 0
    frozen: list[int] = []
    run_replay(
        _cn_plan(_migrated(sqlite_url)),
        progress=lambda done, _total: frozen.append(gc.get_freeze_count()),
    )
    # Frozen as the replay starts, then again after the first slot (which loads the data).
    assert 0 < frozen[0] < frozen[1], frozen
    assert all(count > frozen[0] for count in frozen[1:]), frozen
    assert len(frozen) == SESSIONS + 1
    assert gc.get_freeze_count() == 0


def test_a_replay_leaves_a_heap_frozen_before_it_alone(tmp_path: Path) -> None:
    sentinel: list[object] = [[]]  # a container: tracked by the collector

    def frozen() -> bool:  # the collector's generations do not list the frozen objects
        return not any(found is sentinel for found in gc.get_objects())

    gc.freeze()
    try:
        assert frozen()
        run_replay(_cn_plan(_migrated(f"sqlite:///{tmp_path / 'frozen.db'}")))
        assert frozen()
    finally:
        gc.unfreeze()
    assert not frozen()


def test_a_replayed_window_is_refused_without_resume(sqlite_url: str) -> None:
    plan = _cn_plan(_migrated(sqlite_url))
    run_replay(plan)
    engine = make_engine(sqlite_url)
    try:
        before = dump_tables(engine)
        with pytest.raises(OperatorError, match="use --resume or a fresh database"):
            run_replay(plan)
        again = run_replay(_cn_plan(sqlite_url, resume=True))
        assert again.cycles_already == SESSIONS * len(BASELINE_KINDS)
        assert (again.cycles_done, again.fills, again.close_snapshots) == (0, 0, 0)
        assert dump_tables(engine) == before
    finally:
        engine.dispose()


def test_crypto_closes_come_before_the_next_days_slot() -> None:
    market = crypto_daily()
    start = utc(2025, 3, 1)
    plan = ReplayPlan(
        store_url="sqlite://", start_at=start, end_at=start + timedelta(days=2), markets=(market,)
    )
    assert [(event.at, event.kind.name) for event in plan_events(plan)] == [
        (start, "SLOT"),
        (start + timedelta(days=1), "CLOSE"),
        (start + timedelta(days=1), "SLOT"),
        (start + timedelta(days=2), "CLOSE"),
    ]
