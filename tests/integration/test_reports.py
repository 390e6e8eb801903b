"""Leaderboards, reports, the benchmark and exports, from a hand-built ledger on real SQLite."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine

from openbell.markets.domain import Bar, utc
from openbell.markets.errors import ReportError
from openbell.markets.replay_source import ReplaySource
from openbell.ops.evaluation.benchmark import CD5_WEIGHTS, benchmark_navs, bundled_source
from openbell.ops.evaluation.ranking import Entrant, composite_rank
from openbell.ops.evaluation.return_metrics import (
    NavPoint,
    compute_panel,
    infer_cadence,
    periods_per_year,
)
from openbell.ops.reports import exporting
from openbell.ops.reports.market_reports import leaderboard, report
from openbell.store import exports, queries
from openbell.store.cache import SqlBarCache
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleStatus, SnapshotKind
from openbell_testkit.reports import AAPL, INITIAL, SLOTS, Built, build_ledger


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Built]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('reports') / 'ledger.db'}"
    upgrade(url)
    engine = make_engine(url)
    result = build_ledger(Ledger(engine))
    yield engine, result
    engine.dispose()


def test_the_ledger_holds_the_navs_the_builder_meant(built: tuple[Engine, Built]) -> None:
    _engine, result = built
    assert result.navs["us", "alpha"] == [Decimal(9000) + 10 * price for price in AAPL]
    assert result.navs["us", "beta"] == [INITIAL] * 6
    assert result.navs["us", "gamma"] == [
        Decimal(n) for n in (10000, 10000, 9980, 10060, 10060, 10060)
    ]


def test_leaderboard_matches_ops_metrics_on_the_same_series(built: tuple[Engine, Built]) -> None:
    engine, result = built
    board = leaderboard(engine, "us")
    assert (board.cadence, board.periods_per_year, board.benchmark) == ("daily", 252.0, "QQQ")
    bench = benchmark_navs("us", list(SLOTS), INITIAL)
    assert [p.at for p in bench] == list(SLOTS)
    entrants = []
    for agent in ("alpha", "beta", "gamma"):
        navs = [
            NavPoint(at=at, nav=nav)
            for at, nav in zip(SLOTS, result.navs["us", agent], strict=True)
        ]
        panel = compute_panel(
            navs, periods_per_year=periods_per_year("us", "daily"), benchmark=bench
        )
        entrants.append(Entrant(name=agent, panel=panel))
        row = next(r for r in board.rows if r.agent == agent)
        assert row.panel == panel
        assert row.final_nav == result.navs["us", agent][-1]
    bench_panel = compute_panel(bench, periods_per_year=252.0)
    entrants.append(Entrant(name="benchmark:QQQ", panel=bench_panel, is_benchmark=True))
    assert tuple(row.ranking for row in board.rows) == composite_rank(entrants)


def test_the_benchmark_is_an_unranked_row_priced_from_qqq(built: tuple[Engine, Built]) -> None:
    engine, _result = built
    board = leaderboard(engine, "us")
    (row,) = [r for r in board.rows if r.is_benchmark]
    assert (row.name, row.rank, row.agent, row.behaviour) == ("benchmark:QQQ", None, None, None)
    assert sorted(r.rank or 0 for r in board.rows if not r.is_benchmark) == [1, 2, 3]
    first = bundled_source("us").quote_at("QQQ", SLOTS[0])
    last = bundled_source("us").quote_at("QQQ", SLOTS[-1])
    assert first is not None
    assert last is not None
    assert first.at == SLOTS[0]  # the open of the daily bar starting at the slot
    assert row.panel.cumulative_return == pytest.approx(
        float(last.price / first.price) - 1, rel=1e-12
    )
    assert row.final_nav == (INITIAL * last.price / first.price).quantize(Decimal("0.01"))


def test_behaviour_columns(built: tuple[Engine, Built]) -> None:
    engine, result = built
    rows = {r.agent: r for r in leaderboard(engine, "us").rows}
    gamma = rows["gamma"].behaviour
    assert gamma is not None
    assert (gamma.trades, gamma.cycles) == (2, 6)
    assert gamma.no_trade_share == pytest.approx(4 / 6)
    assert gamma.rejection_rate == pytest.approx(1 / 3)
    mean_nav = sum(result.navs["us", "gamma"]) / 6
    assert gamma.turnover == pytest.approx(float((Decimal(2040) + Decimal(2100)) / mean_nav))
    assert (gamma.hhi, gamma.cash_ratio) == (None, 1.0)
    alpha = rows["alpha"].behaviour
    assert alpha is not None
    assert alpha.hhi == 1.0
    assert alpha.cash_ratio == pytest.approx(9000 / 10080)
    beta = rows["beta"].behaviour
    assert beta is not None
    assert (beta.trades, beta.no_trade_share, beta.rejection_rate, beta.turnover) == (
        0,
        1.0,
        None,
        0.0,
    )


def test_a_window_limits_every_series(built: tuple[Engine, Built]) -> None:
    engine, _result = built
    board = leaderboard(engine, "us", start=SLOTS[1], end=SLOTS[4])
    gamma = next(r for r in board.rows if r.agent == "gamma")
    assert gamma.panel.periods == 2
    assert gamma.behaviour is not None
    assert (gamma.behaviour.trades, gamma.behaviour.cycles) == (2, 3)


@pytest.mark.parametrize(("end", "last"), [(None, 5), (SLOTS[4], 3)])
def test_last_snapshots_are_each_accounts_own(db_url: str, end: datetime | None, last: int) -> None:
    """One query reads every account's last snapshot in the window and its holdings: each must
    get its own (only alpha holds AAPL, 10 shares). On SQLite and Postgres (a row-value IN)."""
    upgrade(db_url)
    engine = make_engine(db_url)
    try:
        result = build_ledger(Ledger(engine))
        ids = {agent: result.accounts["us", agent] for agent in ("gamma", "alpha", "beta")}
        found = queries.last_snapshots(engine, list(ids.values()), end=end)
    finally:
        engine.dispose()
    assert set(found) == set(ids.values())
    for agent, account_id in ids.items():
        nav, holdings = found[account_id]
        assert (nav.at, nav.nav) == (SLOTS[last], result.navs["us", agent][last])
        expected = [("AAPL", Decimal(10), AAPL[last])] if agent == "alpha" else []
        assert [(h.symbol, h.quantity, h.price) for h in holdings] == expected


def test_report_calibration_uses_the_next_mark(built: tuple[Engine, Built]) -> None:
    engine, _result = built
    gamma = report(engine, "gamma", "us")
    # buy at 102 (0.3), next mark 101: wrong; sell at 105 (0.6), next mark (alpha's) 103: right.
    assert gamma.forecasts == 2
    assert gamma.brier_score == pytest.approx((0.3**2 + 0.4**2) / 2)
    assert gamma.expected_calibration_error == pytest.approx((0.3 + 0.4) / 2)
    alpha = report(engine, "alpha", "us")
    assert (alpha.forecasts, alpha.brier_score) == (1, pytest.approx(0.2**2))
    assert alpha.row.rank is not None
    assert [p.nav for p in alpha.navs] == [Decimal(9000) + 10 * p for p in AAPL]
    assert len(alpha.benchmark_navs) == len(SLOTS)


def test_unknown_agent_or_market_is_a_report_error(built: tuple[Engine, Built]) -> None:
    engine, _result = built
    with pytest.raises(ReportError, match="'nobody'"):
        report(engine, "nobody", "us")
    with pytest.raises(ReportError, match="unknown market"):
        leaderboard(engine, "mars")
    with pytest.raises(ReportError, match="no accounts in market 'cn'"):
        leaderboard(engine, "cn")


def _bar(symbol: str, day: int, open_: str) -> Bar:
    price = Decimal(open_)
    start = utc(2025, 10, day)
    return Bar(
        symbol=symbol,
        start_at=start,
        end_at=utc(2025, 10, day + 1),
        open=price,
        high=price,
        low=price,
        close=price,
        volume=Decimal(1),
    )


def test_cd5_basket_by_hand() -> None:
    opens = {
        "BTC/USDT": ("100000", "110000"),
        "ETH/USDT": ("4000", "3000"),
        "XRP/USDT": ("2", "3"),
        "SOL/USDT": ("200", "200"),
        "ADA/USDT": ("1", "0.5"),
    }
    bars = [
        _bar(symbol, day, price)
        for symbol, (a, b) in opens.items()
        for day, price in ((1, a), (2, b))
    ]
    source = ReplaySource(market="crypto", bars={"1d": bars})
    stamps = [utc(2025, 10, 1), utc(2025, 10, 2), utc(2025, 10, 5)]
    navs = benchmark_navs("crypto", stamps, Decimal(10000), sources=[source])
    total = Decimal("100.02")
    expected = Decimal(10000) * (
        Decimal("74.56") / total * Decimal("1.1")
        + Decimal("15.97") / total * Decimal("0.75")
        + Decimal("5.20") / total * Decimal("1.5")
        + Decimal("3.53") / total * Decimal(1)
        + Decimal("0.76") / total * Decimal("0.5")
    )
    assert sum(CD5_WEIGHTS.values()) == total
    assert navs[0] == NavPoint(at=stamps[0], nav=Decimal(10000))
    assert navs[1].nav == pytest.approx(expected, rel=Decimal("1e-20"))
    # 2025-10-05: no bar starts then; the last close (the 10-02 bar's, ended 10-03) is carried.
    assert navs[2].nav == navs[1].nav


def test_cadence_inference() -> None:
    hourly = [datetime(2025, 10, 1, h, tzinfo=UTC) for h in (13, 14, 15)] + [
        datetime(2025, 10, 2, 13, tzinfo=UTC)
    ]
    assert infer_cadence(hourly) == "hourly"
    assert infer_cadence(list(SLOTS)) == "daily"
    assert infer_cadence(SLOTS[:1]) == "daily"


def test_csv_exports_have_stable_columns_and_every_row(built: tuple[Engine, Built]) -> None:
    engine, _result = built
    counts = {"nav": 6 * 3 + 3, "orders": 4 + 1, "fills": 3 + 1, "cycles": 6 * 3 + 3}
    for table, count in counts.items():
        stream = io.StringIO()
        written = exporting.write_csv(
            exports.export_columns(table), exports.export_rows(engine, table), stream
        )
        lines = stream.getvalue().splitlines()
        assert lines[0].split(",") == list(exports.EXPORTS[table].columns)
        assert written == count == len(lines) - 1
    stream = io.StringIO()
    exporting.write_csv(
        exports.export_columns("fills"),
        exports.export_rows(engine, "fills", market="us", agent="gamma"),
        stream,
    )
    header, *rows = [line.split(",") for line in stream.getvalue().splitlines()]
    fill = dict(zip(header, rows[0], strict=True))
    assert len(rows) == 2
    assert (fill["agent"], fill["symbol"], fill["side"], fill["price"], fill["notional"]) == (
        "gamma",
        "AAPL",
        "buy",
        "102",
        "2040.00",
    )
    assert fill["filled_at"] == "2025-10-02T13:30:00+00:00"


def test_parquet_round_trip(built: tuple[Engine, Built], tmp_path: Path) -> None:
    engine, _result = built
    path = tmp_path / "nav.parquet"
    columns = exports.export_columns("nav")
    assert exporting.write_parquet(columns, exports.export_rows(engine, "nav"), path, batch=4) == 21
    table = pq.read_table(path)
    assert table.column_names == list(columns)
    expected = list(exports.export_rows(engine, "nav"))
    got = table.to_pylist()
    assert len(got) == len(expected)
    for row, want in zip(got, expected, strict=True):
        assert row["at"] == want[3]
        assert (row["account_id"], row["agent"], row["kind"]) == (want[0], want[1], want[4])
        assert Decimal(row["nav"]) == want[7]


def test_a_live_benchmark_moves_with_the_bars_the_daemon_cached(sqlite_url: str) -> None:
    """Past the bundled data, the benchmark is priced from the ledger's bar cache, not carried."""
    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    ledger = Ledger(engine)
    days = (23, 24, 25)  # 2026-11: after the bundled bars end
    # after each session's close; the 26th's bar was cached before it ended: not final, not used
    stamps = [utc(2026, 11, day, 22) for day in (*days, 26)]
    opened = stamps[0] - timedelta(days=7)
    account = ledger.open_account(
        ledger.ensure_agent("cash", "cash", opened), "us", "USD", INITIAL, opened
    )
    for at in stamps:
        cycle = ledger.claim_cycle(account, at, "test", at + timedelta(minutes=5), at)
        assert cycle is not None
        ledger.write_nav_snapshot(account, at, SnapshotKind.SLOT, {})
        ledger.finish_cycle(cycle, CycleStatus.DONE, at)
    flat = report(engine, "cash", "us").benchmark_navs
    assert {point.nav for point in flat} == {INITIAL}  # the last bundled close, carried
    closes = (Decimal(500), Decimal(510), Decimal(495))
    bars = [
        Bar(symbol="QQQ", start_at=utc(2026, 11, day, 14, 30), end_at=utc(2026, 11, day, 21),
            open=close, high=close, low=close, close=close, volume=Decimal(1000))
        for day, close in zip(days, closes, strict=True)
    ]  # fmt: skip
    cache = SqlBarCache(engine)
    cache.put_bars(source="yfinance", interval="1d", bars=bars, fetched_at=utc(2026, 11, 26))
    unfinished = Bar(symbol="QQQ", start_at=utc(2026, 11, 26, 14, 30), end_at=utc(2026, 11, 26, 21),
                     open=Decimal(1), high=Decimal(1), low=Decimal(1), close=Decimal(1),
                     volume=Decimal(1))  # fmt: skip
    cache.put_bars(
        source="yfinance", interval="1d", bars=[unfinished], fetched_at=utc(2026, 11, 26, 15)
    )
    moving = report(engine, "cash", "us").benchmark_navs
    assert [(point.at, point.nav) for point in moving] == [
        (stamps[0], INITIAL),
        (stamps[1], INITIAL * Decimal(510) / Decimal(500)),
        (stamps[2], INITIAL * Decimal(495) / Decimal(500)),
        (stamps[3], INITIAL * Decimal(495) / Decimal(500)),
    ]
    engine.dispose()
