"""Factor attribution over a real replayed ledger, on SQLite and Postgres: the glue's reads."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from datetime import date
from decimal import Decimal

import pytest
from sqlalchemy import Engine, delete

from openbell.agents.baselines import build_agent
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import Instrument, utc
from openbell.markets.errors import ReportError
from openbell.markets.fundamentals import FundamentalsReport
from openbell.markets.recorded import KnownReport
from openbell.markets.universes import Period, Universe, load_universe
from openbell.ops.evaluation.attribution.exposures import NO_AMOUNT, STYLE_SETS
from openbell.ops.evaluation.attribution.ledger_inputs import account_attribution
from openbell.ops.evaluation.attribution.output import attribution_record, part_rows
from openbell.ops.evaluation.benchmark import bundled_source, carried_prices
from openbell.store import queries
from openbell.store.cache import SqlBarCache
from openbell.store.core_tables import FUNDAMENTALS_REPORT_TABLE
from openbell.store.db import make_engine
from openbell.store.migrate import upgrade
from openbell.store.snapshot_holdings import snapshot_holdings
from openbell_testkit.postgres import PgServer
from openbell_testkit.replay import crypto_daily

START = utc(2025, 3, 1)
END = utc(2025, 5, 1)  # 61 daily slots: 60 periods
AGENTS = ("equal_weight", "buy_and_hold", "random", "cash")


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def replayed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """The crypto10 universe replayed over the bundled daily bars by four baselines, once per
    database (a real SQLite file, a fresh Postgres schema) for the module's tests."""
    if request.param == "sqlite":
        db_url = f"sqlite:///{tmp_path_factory.mktemp('attribution') / 'ledger.db'}"
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        db_url = server.fresh_schema_url()
    upgrade(db_url)
    market = crypto_daily(
        *(build_agent(kind, kind.replace("_", "-"), market="crypto", seed=3) for kind in AGENTS)
    )
    run_replay(ReplayPlan(store_url=db_url, start_at=START, end_at=END, markets=(market,)))
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


def _account_id(engine: Engine, agent: str) -> int:
    (info,) = [i for i in queries.accounts(engine, "crypto") if i.agent_name == agent]
    return info.account_id


def test_the_snapshots_are_read_with_the_holdings_they_valued(replayed: Engine) -> None:
    account_id = _account_id(replayed, "equal-weight")
    found = snapshot_holdings(replayed, account_id)
    navs = queries.nav_series(replayed, account_id)
    assert [item.snapshot for item in found] == navs
    assert len(found) == 61
    for item in found:
        values = sum((holding.value for holding in item.holdings), Decimal(0))
        assert item.snapshot.cash + values == item.snapshot.nav
        assert [h.symbol for h in item.holdings] == sorted(h.symbol for h in item.holdings)
    last_nav, last_holdings = queries.last_snapshots(replayed, [account_id])[account_id]
    assert (found[-1].snapshot, list(found[-1].holdings)) == (last_nav, last_holdings)
    window = snapshot_holdings(replayed, account_id, utc(2025, 4, 1), utc(2025, 4, 11))
    assert [item.snapshot.at for item in window] == [utc(2025, 4, day) for day in range(1, 11)]


def test_the_parts_sum_to_each_period_and_to_the_window(replayed: Engine) -> None:
    for agent in ("equal-weight", "buy-and-hold", "random"):
        found = account_attribution(replayed, agent, "crypto")
        window = found.attribution
        navs = [row.nav for row in queries.nav_series(replayed, _account_id(replayed, agent))]
        assert len(window.periods) == len(navs) - 1
        for period, before, after in zip(window.periods, navs, navs[1:], strict=False):
            assert period.total == float(after / before - 1)
            assert abs(period.parts_sum - period.total) <= 1e-12
        assert window.total == pytest.approx(float(navs[-1] / navs[0] - 1), abs=1e-12)
        assert abs(window.parts_sum - window.total) <= 1e-12
        record = attribution_record(found)
        assert [row.part for row in part_rows(record)][-1] == "total"
        assert math.fsum(row.contribution for row in part_rows(record)[:-1]) == pytest.approx(
            record["total"], abs=1e-12
        )


def test_the_weights_are_the_opening_snapshots_marks(replayed: Engine) -> None:
    found = account_attribution(replayed, "buy-and-hold", "crypto")
    snapshots = snapshot_holdings(replayed, _account_id(replayed, "buy-and-hold"))
    for period, opening in zip(found.attribution.periods, snapshots, strict=False):
        assert period.start_at == opening.snapshot.at
        held = sum((h.value for h in opening.holdings), Decimal(0)) / opening.snapshot.nav
        assert period.invested == pytest.approx(float(held), abs=1e-12)


def test_an_equal_weight_book_is_attributed_mostly_to_the_market(replayed: Engine) -> None:
    """Threshold: the market part is more than 80 % of the parts' absolute sizes summed over
    the periods (the baseline's weights drift from equal between its rebalances, and it pays
    fees: the rest is style, selection and trading)."""
    window = account_attribution(replayed, "equal-weight", "crypto").attribution
    sizes = [
        abs(p.market) + sum(map(abs, p.styles.values())) + abs(p.selection) + abs(p.trading)
        for p in window.periods
    ]
    assert math.fsum(abs(p.market) for p in window.periods) / math.fsum(sizes) > 0.8


def test_a_cash_book_has_no_part_and_styles_without_fundamentals_are_skipped(
    replayed: Engine,
) -> None:
    found = account_attribution(replayed, "cash", "crypto")
    window = found.attribution
    assert window.total == 0.0
    assert (window.market, window.selection, window.trading) == (0.0, 0.0, 0.0)
    assert found.universe == tuple(sorted(found.universe))
    assert len(found.universe) == 10
    assert (found.interval, found.cadence) == ("1d", "daily")
    skipped = attribution_record(found)["skipped"]
    # Bundled crypto bars reach back years (52-week highs) and carry no amounts.
    assert set(skipped) == {"size", "value", "amount_variability"}
    assert skipped["amount_variability"] == NO_AMOUNT


def test_fundamentals_published_mid_window_give_size_and_value_from_then_on(
    replayed: Engine,
) -> None:
    published = utc(2025, 3, 15, 12)
    coins = ("ADA", "AVAX", "BTC", "DOT", "ETH", "LINK", "LTC", "SOL", "SUI", "XRP")
    reports = [
        FundamentalsReport(
            symbol=f"{coin}/USDT",
            period_end=date(2024, 12, 31),
            published_at=published,
            currency="USDT",
            values={"market_cap": Decimal(10**9 * (i + 1) ** 2), "book_to_price": Decimal(i % 4)},
        )
        for i, coin in enumerate(coins)
    ]
    window = account_attribution(replayed, "random", "crypto", fundamentals=reports).attribution
    before = [p for p in window.periods if p.start_at < published]
    after = [p for p in window.periods if p.start_at >= published]
    assert len(before) == 15
    for period in before:
        assert period.dropped["size"].startswith("no report published by")
        assert "size" not in period.styles
    assert any("size" in p.styles for p in after)
    assert any("value" in p.styles for p in after)
    assert abs(window.parts_sum - window.total) <= 1e-12


def test_reports_in_the_ledgers_cache_give_size_and_value_from_when_they_were_known(
    replayed: Engine,
) -> None:
    # As a live daemon records them (or `openbell data import-fundamentals`): the report of each
    # coin is published on 03-01 but first served on 03-15, and counts from then on.
    published, known = utc(2025, 3, 1, 12), utc(2025, 3, 15, 12)
    coins = ("ADA", "AVAX", "BTC", "DOT", "ETH", "LINK", "LTC", "SOL", "SUI", "XRP")
    reports = [
        KnownReport(
            report=FundamentalsReport(
                symbol=f"{coin}/USDT",
                period_end=date(2024, 12, 31),
                published_at=published,
                currency="USDT",
                values={"market_cap": Decimal(10**9 * (i + 1) ** 2), "book_to_price": Decimal(i)},
            ),
            known_at=known,
        )
        for i, coin in enumerate(coins)
    ]
    SqlBarCache(replayed).put_reports(source="test", reports=reports, fetched_at=known)
    try:
        window = account_attribution(replayed, "random", "crypto").attribution
    finally:
        with replayed.begin() as connection:
            connection.execute(delete(FUNDAMENTALS_REPORT_TABLE))
    before = [p for p in window.periods if p.start_at < known]
    assert before
    assert all("size" not in p.styles and "value" not in p.styles for p in before)
    after = [p for p in window.periods if p.start_at >= known]
    assert any("size" in p.styles for p in after)
    assert any("value" in p.styles for p in after)
    assert abs(window.parts_sum - window.total) <= 1e-12
    # Nothing recorded: the two styles are skipped again.
    assert set(
        attribution_record(account_attribution(replayed, "random", "crypto"))["skipped"]
    ) == {"size", "value", "amount_variability"}


def test_unknown_agents_and_short_windows_are_report_errors(replayed: Engine) -> None:
    with pytest.raises(ReportError, match="no account"):
        account_attribution(replayed, "nobody", "crypto")
    with pytest.raises(ReportError, match="fewer than two"):
        account_attribution(replayed, "cash", "crypto", utc(2025, 4, 1), utc(2025, 4, 2))


def test_a_universe_cross_section_is_its_members_at_each_date(replayed: Engine) -> None:
    full = load_universe("crypto10")
    joined = date(2025, 4, 1)
    dates = {"BTC/USDT": Period(from_date=joined), "ETH/USDT": Period(from_date=joined)}
    late = replace(full, coverage=None, memberships=dates)  # dated members, as a file gives them
    by_bars = account_attribution(replayed, "random", "crypto")
    every = account_attribution(replayed, "random", "crypto", universe=full)
    dated = account_attribution(replayed, "random", "crypto", universe=late)
    # Every member has bars: the universe's cross-section is the bars' one, period by period.
    assert every.attribution.periods == by_bars.attribution.periods
    assert attribution_record(every)["cross_section"] == "members of universe crypto10 at each date"
    assert attribution_record(by_bars)["cross_section"] == "every symbol with bars"
    for period, whole in zip(dated.attribution.periods, every.attribution.periods, strict=True):
        if period.start_at >= utc(2025, 4, 1):
            assert period == whole
        else:  # BTC and ETH not yet members: a different market and styles, the same total
            assert period.market != whole.market
            assert period.total == whole.total
        assert abs(period.parts_sum - period.total) <= 1e-12
    assert abs(dated.attribution.parts_sum - dated.attribution.total) <= 1e-12
    with pytest.raises(ReportError, match="not of market"):
        account_attribution(replayed, "random", "crypto", universe=load_universe("sse50"))


def test_the_ktd_fin_style_set_still_sums_to_the_total(replayed: Engine) -> None:
    for agent in ("equal-weight", "random"):
        found = account_attribution(replayed, agent, "crypto", styles=STYLE_SETS["ktd-fin"])
        window = found.attribution
        record = attribution_record(found)
        assert record["styles"] == list(STYLE_SETS["ktd-fin"])
        assert "beta" not in window.styles
        assert "size" not in record["skipped"]  # not in the set: not said skipped either
        assert record["skipped"] == {"amount_variability": NO_AMOUNT}
        assert "high_52w" in window.mean_exposures
        for period in window.periods:
            assert abs(period.parts_sum - period.total) <= 1e-12
        assert abs(window.parts_sum - window.total) <= 1e-12


def test_a_universe_cross_section_estimates_each_period_on_its_days_members(
    replayed: Engine,
) -> None:
    """Eight coins, DOT a member until 2025-04-01 (excluded): each period's estimation sample is
    the members of the day it opens: its market factor is their mean return (the market part is
    the book's invested weight times it), and its thin-cross-section reasons count them (the
    periods before April drop enough styles for other reasons: they may have none)."""
    coins = ("BTC", "ETH", "XRP", "SOL", "ADA", "LINK", "LTC", "DOT")
    universe = Universe(
        name="crypto8",
        market="crypto",
        as_of=date(2025, 3, 1),
        instruments=tuple(
            Instrument(symbol=f"{coin}/USDT", market="crypto", currency="USDT") for coin in coins
        ),
        memberships={"DOT/USDT": Period(until_date=date(2025, 4, 1), source="a test")},
    )
    found = account_attribution(replayed, "equal-weight", "crypto", universe=universe)
    assert found.universe == tuple(sorted(f"{coin}/USDT" for coin in coins))
    assert found.cross_section == "members of universe crypto8 at each date"
    counts: dict[bool, set[str]] = {True: set(), False: set()}
    for period in found.attribution.periods:
        thin = [r for r in period.dropped.values() if r.startswith("thin cross-section")]
        counts[period.start_at < utc(2025, 4, 1)].update(thin)
        assert abs(period.parts_sum - period.total) <= 1e-12
    assert counts[True] <= {"thin cross-section (8 symbols)"}
    assert counts[False] == {"thin cross-section (7 symbols)"}
    stamps = [p.start_at for p in found.attribution.periods] + [
        found.attribution.periods[-1].end_at
    ]
    prices = {
        symbol: carried_prices((bundled_source("crypto"),), symbol, stamps)
        for symbol in universe.symbols
    }
    for index, period in enumerate(found.attribution.periods):
        returns = [
            float(prices[s][index + 1]) / float(prices[s][index]) - 1
            for s in universe.members_on(period.start_at.date())
        ]
        assert len(returns) == (8 if period.start_at < utc(2025, 4, 1) else 7)
        expected = period.invested * math.fsum(returns) / len(returns)
        assert period.market == pytest.approx(expected, rel=1e-9, abs=1e-15)
    default = account_attribution(replayed, "equal-weight", "crypto")
    assert default.cross_section == "every symbol with bars"
    assert len(default.universe) == 10
