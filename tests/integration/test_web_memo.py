"""The web API's memo: a leaderboard and a report computed once, and again after any ledger write.

Over the demo's crypto market replayed for a week on SQLite and Postgres: the memo serves the same
view while the ledger is unchanged, and a new one, equal to a fresh computation, after a cycle is
claimed, after it finishes (an update, not an insert) and after a NAV snapshot is written.
"""

from __future__ import annotations

import dataclasses
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

from openbell.markets.domain import utc
from openbell.ops.reports.exporting import leaderboard_record, report_record
from openbell.ops.reports.market_reports import leaderboard, report
from openbell.ops.web.memo import ViewMemo
from openbell.ops.wiring.demo import DEMO_MARKETS, demo_config
from openbell.ops.wiring.planning import replay_from_config
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.holdings import account_holdings
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus, SnapshotKind

START, END = date(2025, 10, 1), date(2025, 10, 7)
CRYPTO = dataclasses.replace(
    next(spec for spec in DEMO_MARKETS if spec.market == "crypto"), start=START, end=END
)


def test_the_memo_recomputes_after_every_kind_of_ledger_write(db_url: str, tmp_path: Path) -> None:
    config = demo_config(tmp_path / "unused.db", [CRYPTO])
    config = config.model_copy(update={"store": config.store.model_copy(update={"url": db_url})})
    upgrade(db_url)
    replay_from_config(
        config, start=START, end=END, market="crypto", resume=False, show_progress=False
    )
    engine = make_engine(db_url)
    try:
        memo = ViewMemo(engine)
        first = memo.view("crypto")
        assert memo.view("crypto") is first
        assert memo.report("random", "crypto") is memo.report("random", "crypto")
        assert leaderboard_record(first.leaderboard) == leaderboard_record(
            leaderboard(engine, "crypto")
        )

        ledger = Ledger(engine)
        account_id = next(
            info.account_id
            for info in queries.accounts(engine, "crypto")
            if info.agent_name == "random"
        )
        slot_at = utc(2025, 10, 8)
        now = slot_at + timedelta(seconds=1)
        seen = [first]

        def changed() -> None:
            view = memo.view("crypto")
            assert all(view is not old for old in seen)
            seen.append(view)
            assert memo.view("crypto") is view
            assert leaderboard_record(view.leaderboard) == leaderboard_record(
                leaderboard(engine, "crypto")
            )
            assert report_record(memo.report("random", "crypto")) == report_record(
                report(engine, "random", "crypto")
            )

        cycle_id = ledger.claim_cycle(account_id, slot_at, "test", now + timedelta(hours=1), now)
        assert cycle_id is not None
        changed()
        before = memo.view("crypto").leaderboard.rows
        ledger.finish_cycle(cycle_id, CycleStatus.DONE, now, held_by="test")
        changed()
        row = next(r for r in memo.view("crypto").leaderboard.rows if r.agent == "random")
        old = next(r for r in before if r.agent == "random")
        assert row.behaviour != old.behaviour  # the finished cycle counts as a no-trade decision
        (held,) = account_holdings(engine, market="crypto", agent="random")
        marks = {h.symbol: h.last_mark for h in held.holdings if h.last_mark is not None}
        ledger.write_nav_snapshot(account_id, slot_at, SnapshotKind.SLOT, marks)
        changed()
        row = next(r for r in memo.view("crypto").leaderboard.rows if r.agent == "random")
        assert row.panel.end_at == slot_at
    finally:
        engine.dispose()


def test_a_slot_of_another_market_leaves_the_view_and_one_of_its_own_does_not(
    db_url: str, tmp_path: Path
) -> None:
    config = demo_config(tmp_path / "unused.db", [CRYPTO])
    config = config.model_copy(update={"store": config.store.model_copy(update={"url": db_url})})
    upgrade(db_url)
    replay_from_config(
        config, start=START, end=END, market="crypto", resume=False, show_progress=False
    )
    engine = make_engine(db_url)
    try:
        memo = ViewMemo(engine)
        crypto = memo.view("crypto")
        ledger = Ledger(engine)
        slot_at = utc(2025, 10, 8, 14)
        now = slot_at + timedelta(seconds=1)
        agent_id = ledger.ensure_agent("us-only", "cash", now)
        us_account = ledger.open_account(agent_id, "us", "USD", Decimal(10000), now)
        us = memo.view("us")
        version = queries.ledger_version(engine)
        # A US slot: the account's cycle claimed, its snapshot written, the cycle finished.
        cycle_id = ledger.claim_cycle(us_account, slot_at, "test", now + timedelta(hours=1), now)
        assert cycle_id is not None
        ledger.write_nav_snapshot(us_account, slot_at, SnapshotKind.SLOT, {})
        ledger.finish_cycle(cycle_id, CycleStatus.DONE, now, held_by="test")
        assert queries.ledger_version(engine) != version
        assert memo.view("crypto") is crypto  # not recomputed
        assert memo.view("us") is not us
        # A crypto cycle claimed: the crypto view is recomputed.
        crypto_account = queries.accounts(engine, "crypto")[0].account_id
        assert ledger.claim_cycle(crypto_account, slot_at, "test", now, now) is not None
        assert memo.view("crypto") is not crypto
    finally:
        engine.dispose()
