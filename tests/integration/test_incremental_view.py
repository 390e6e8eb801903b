"""A market's view read incrementally (`ops.reports.cycle_facts`) is the view computed whole.

Over the demo's crypto market replayed for a week on SQLite and Postgres: a view is computed with
its cycle facts kept, the replay goes on for more slots, and the view computed again reads only
the cycles from the kept mark on, and equals one computed from scratch, field by field. A `missed`
cycle recorded behind the mark, a claim made behind it and then superseded, and a cycle row
deleted behind it each force a whole read, with the same result as from scratch.
"""

from __future__ import annotations

import dataclasses
from datetime import date, timedelta
from pathlib import Path

from sqlalchemy import Engine, delete

from openbell.markets.domain import utc
from openbell.ops.reports.cycle_facts import SealedCycleFacts, read_cycle_facts
from openbell.ops.reports.market_reports import MarketView, market_view
from openbell.ops.wiring.planning import replay_from_config
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus
from openbell.store.tables import CycleRow
from openbell_testkit.replay import demo_crypto_replayed

START, END, LATER = date(2025, 10, 1), date(2025, 10, 7), date(2025, 10, 10)


def _same(incremental: MarketView, whole: MarketView) -> None:
    """The two views are equal field by field (each row, each account), and as a whole."""
    for field in dataclasses.fields(whole.leaderboard):
        if field.name != "rows":
            assert getattr(incremental.leaderboard, field.name) == getattr(
                whole.leaderboard, field.name
            ), field.name
    assert len(incremental.leaderboard.rows) == len(whole.leaderboard.rows)
    for mine, theirs in zip(incremental.leaderboard.rows, whole.leaderboard.rows, strict=True):
        for field in dataclasses.fields(theirs):
            assert getattr(mine, field.name) == getattr(theirs, field.name), (
                theirs.name,
                field.name,
            )
    for mine_account, their_account in zip(incremental.accounts, whole.accounts, strict=True):
        assert mine_account == their_account, their_account.info.agent_name
    assert incremental.benchmark_navs == whole.benchmark_navs
    assert incremental == whole


def _facts_match(engine: Engine, kept: SealedCycleFacts) -> None:
    ids = [info.account_id for info in queries.accounts(engine, "crypto")]
    assert kept.read(engine, ids, None, None) == read_cycle_facts(engine, ids, None, None)


def test_a_view_read_incrementally_is_the_view_computed_whole(db_url: str, tmp_path: Path) -> None:
    config = demo_crypto_replayed(db_url, tmp_path, START, END)
    engine = make_engine(db_url)
    try:
        kept = SealedCycleFacts()
        _same(market_view(engine, "crypto", kept=kept), market_view(engine, "crypto"))
        assert (kept.whole_reads, kept.incremental_reads) == (1, 0)
        before = market_view(engine, "crypto", kept=kept)
        assert (kept.whole_reads, kept.incremental_reads) == (1, 1)

        # More slots: only the cycles from the mark on are read again.
        replay_from_config(
            config, start=START, end=LATER, market="crypto", resume=True, show_progress=False
        )
        after = market_view(engine, "crypto", kept=kept)
        assert (kept.whole_reads, kept.incremental_reads) == (1, 2)
        assert after != before
        _same(after, market_view(engine, "crypto"))
        _facts_match(engine, kept)
        assert kept.incremental_reads == 3

        ledger = Ledger(engine)
        infos = {info.agent_name: info.account_id for info in queries.accounts(engine, "crypto")}
        account_id = infos["random"]
        behind = utc(2025, 10, 3, 12)
        now = utc(2025, 10, 11)

        # A cycle recorded late behind the mark: read whole.
        missed = ledger.record_missed(account_id, behind, now)
        assert missed is not None
        late = market_view(engine, "crypto", kept=kept)
        _same(late, market_view(engine, "crypto"))
        assert kept.whole_reads == 2
        assert late != after

        # A claim made behind the mark (read whole), then superseded by a later one: its status
        # changes from `claimed` to `interrupted`, which the next read sees (the mark stays at the
        # first claimed cycle's slot).
        other = next(found for name, found in sorted(infos.items()) if name != "random")
        claimed = ledger.claim_cycle(
            other, behind, "test", behind + timedelta(minutes=1), behind + timedelta(seconds=1)
        )
        assert claimed is not None
        _same(market_view(engine, "crypto", kept=kept), market_view(engine, "crypto"))
        assert kept.whole_reads == 3
        nxt = utc(2025, 10, 12)
        superseding = ledger.claim_cycle(other, nxt, "test", nxt + timedelta(hours=1), nxt)
        assert superseding is not None
        found = ledger.find_cycle(other, behind)
        assert found is not None
        assert (found.cycle_id, found.status) == (claimed, CycleStatus.INTERRUPTED)
        _same(market_view(engine, "crypto", kept=kept), market_view(engine, "crypto"))
        _facts_match(engine, kept)  # the statuses, which these baselines' figures do not show
        ledger.finish_cycle(superseding, CycleStatus.DONE, nxt, held_by="test")
        _same(market_view(engine, "crypto", kept=kept), market_view(engine, "crypto"))
        incremental = kept.incremental_reads
        _same(market_view(engine, "crypto", kept=kept), market_view(engine, "crypto"))
        assert kept.incremental_reads == incremental + 1

        # A cycle row deleted behind the mark: read whole.
        whole = kept.whole_reads
        with engine.begin() as connection:
            connection.execute(delete(CycleRow).where(CycleRow.id == missed))  # type: ignore[arg-type]
        deleted = market_view(engine, "crypto", kept=kept)
        _same(deleted, market_view(engine, "crypto"))
        assert kept.whole_reads == whole + 1
        _facts_match(engine, kept)
    finally:
        engine.dispose()
