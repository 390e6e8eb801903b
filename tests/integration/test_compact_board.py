"""The compact leaderboard is built without the behaviour metrics (`market_view`'s
`with_behaviour=False`: neither the cycles' facts nor the traded symbols' prices are read for
it), on SQLite and Postgres: every figure it shows must be the one a board built with them has,
and its table the same text."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy import Engine

from openbell.ops.cli.options import print_tables
from openbell.ops.cli.reports import render_table
from openbell.ops.reports.board_significance import market_views
from openbell.ops.reports.market_reports import Leaderboard
from openbell.store.ledger import Ledger
from openbell_testkit.reports import build_ledger


def _compact(boards: Sequence[Leaderboard]) -> str:
    stream = io.StringIO()
    print_tables([render_table(board) for board in boards], stream)
    return stream.getvalue()


def test_a_board_without_behaviour_shows_what_one_with_it_shows(engine: Engine) -> None:
    build_ledger(Ledger(engine))
    full = market_views(engine, None, None, None)
    lean = market_views(engine, None, None, None, with_behaviour=False)
    assert [view.leaderboard.market for view in lean] == ["us", "crypto"]
    for whole, compact in zip(full, lean, strict=True):
        rows = whole.leaderboard.rows
        assert any(row.behaviour is not None and row.behaviour.trades for row in rows)
        assert all(row.behaviour is None for row in compact.leaderboard.rows)
        assert [replace(row, behaviour=None) for row in rows] == list(compact.leaderboard.rows)
        assert replace(whole.leaderboard, rows=()) == replace(compact.leaderboard, rows=())
        assert whole.benchmark_navs == compact.benchmark_navs
        assert [replace(a, behaviour=None) for a in whole.accounts] == list(compact.accounts)
    assert _compact([v.leaderboard for v in lean]) == _compact([v.leaderboard for v in full])
