"""Dollar caps that fail closed, over an hourly crypto replay: every cycle of a scripted model
costs the same, the day's cap stops the account within one cycle's spend of it (the rest of the
day's cycles are `skipped` with `budget_exhausted`), the next UTC day starts afresh, the season's
cap stops it for good, 80 % of a cap is warned about on the cycle's trace, and the report shows
what was spent."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.recorder import Prices
from openbell.agents.llm.spend_caps import BUDGET_EXHAUSTED, SpendCaps
from openbell.daemon.plan import MarketPlan, ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import Instrument
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import Universe
from openbell.ops.reports.market_reports import report
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.seasons import Season, open_season
from openbell.store.tables import CycleRow
from openbell_testkit.llm import ScriptedModel, finish

START_AT = datetime(2025, 11, 3, 18, tzinfo=UTC)  # six hourly slots on the 3rd, six on the 4th
END_AT = START_AT + timedelta(hours=12)
PRICES = Prices(in_per_mtok=Decimal(10), out_per_mtok=Decimal(50))
#: One cycle: one `finish` answer of 100 tokens in, 20 out.
CYCLE_COST = (100 * PRICES.in_per_mtok + 20 * PRICES.out_per_mtok) / 1_000_000
DAY_CAP = CYCLE_COST * Decimal("2.5")  # the third cycle starts under it and ends past it
SEASON_CAP = CYCLE_COST * Decimal("4.5")


def universe() -> Universe:
    return Universe(
        name="two-coins",
        market="crypto",
        as_of=START_AT.date(),
        instruments=tuple(
            Instrument(symbol=symbol, market="crypto", currency="USDT")
            for symbol in ("BTC/USDT", "ETH/USDT")
        ),
    )


def capped(caps: SpendCaps) -> LlmAgent:
    model = ScriptedModel([finish()] * 100)
    return LlmAgent(
        name="capped",
        client=ChatClient(
            ClientConfig(base_url="https://llm.test/v1", model="m-1", api_key="sk-x"),
            http=model.client(),
        ),
        prices=PRICES,
        caps=caps,
    )


def replay(db_url: str, caps: SpendCaps) -> Engine:
    upgrade(db_url)
    run_replay(
        ReplayPlan(
            store_url=db_url,
            start_at=START_AT,
            end_at=END_AT,
            markets=(
                MarketPlan(
                    market="crypto",
                    source=ReplaySource.from_bundled("crypto", names=["crypto-1h"]),
                    universe=universe(),
                    cadence="hourly",
                    initial_cash=Decimal(10000),
                    agents=(capped(caps),),
                ),
            ),
        )
    )
    return make_engine(db_url)


def statuses(engine: Engine) -> list[tuple[int, str, str | None, Decimal]]:
    """(day, status, reason, cost) of each cycle, in slot order."""
    (account,) = queries.accounts(engine, "crypto")
    query = (
        select(CycleRow)
        .where(CycleRow.account_id == account.account_id)
        .order_by(col(CycleRow.slot_at))
    )
    with Session(engine) as session:
        return [
            (row.slot_at.day, row.status, row.reason, row.cost or Decimal(0))
            for row in session.exec(query)
        ]


def test_a_days_cap_stops_the_account_within_one_cycle_and_resets_the_next_day(
    db_url: str,
) -> None:
    engine = replay(db_url, SpendCaps(per_day=DAY_CAP))
    try:
        found = statuses(engine)
        runs, skip = ("done", None, CYCLE_COST), ("skipped", BUDGET_EXHAUSTED, Decimal(0))
        assert [(status, reason, cost) for _, status, reason, cost in found] == (
            [runs] * 3 + [skip] * 3
        ) * 2
        for day in (3, 4):
            spent = sum(cost for d, _, _, cost in found if d == day)
            assert DAY_CAP <= spent < DAY_CAP + CYCLE_COST
            shown = report(
                engine,
                "capped",
                "crypto",
                start=datetime(2025, 11, day, tzinfo=UTC),
                end=datetime(2025, 11, day + 1, tzinfo=UTC),
            )
            assert shown.llm is not None
            assert shown.llm.cost == spent
            assert shown.llm.decisions == 3  # the skipped cycles are no decisions
        whole = report(engine, "capped", "crypto")
        assert whole.llm is not None
        assert whole.llm.cost == 6 * CYCLE_COST
        (account,) = queries.accounts(engine, "crypto")
        ledger = Ledger(engine)
        warned = [
            [t.content for t in ledger.traces(c.cycle_id) if t.role == "budget"]
            for c in queries.cycle_activity(engine, account.account_id)
        ]
        # The third cycle of each day starts at 2 cycles' spend, 80 % of 2.5.
        assert [bool(notes) for notes in warned] == [False, False, True, False, False, False] * 2
        assert "day 2025-11-03" in warned[2][0]
    finally:
        engine.dispose()


def test_the_seasons_cap_stops_the_account_for_good(db_url: str) -> None:
    engine = replay(db_url, SpendCaps(per_day=DAY_CAP, per_season=SEASON_CAP))
    try:
        found = [(day, status) for day, status, _, _ in statuses(engine)]
        assert (
            found
            == [(3, "done")] * 3 + [(3, "skipped")] * 3 + [(4, "done")] * 2 + [(4, "skipped")] * 4
        )
        whole = report(engine, "capped", "crypto")
        assert whole.llm is not None
        assert whole.llm.cost == 5 * CYCLE_COST
        assert SEASON_CAP <= whole.llm.cost < SEASON_CAP + CYCLE_COST
    finally:
        engine.dispose()


def test_a_restarted_run_resumes_the_days_spend_from_the_ledger(db_url: str) -> None:
    """A second run over the rest of the day reads what the first spent: fail closed across a
    restart."""
    upgrade(db_url)
    halfway = START_AT + timedelta(hours=2)
    for start, end in ((START_AT, halfway), (halfway, START_AT + timedelta(hours=6))):
        run_replay(
            ReplayPlan(
                store_url=db_url,
                start_at=start,
                end_at=end,
                markets=(
                    MarketPlan(
                        market="crypto",
                        source=ReplaySource.from_bundled("crypto", names=["crypto-1h"]),
                        universe=universe(),
                        cadence="hourly",
                        initial_cash=Decimal(10000),
                        agents=(capped(SpendCaps(per_day=DAY_CAP)),),
                    ),
                ),
            )
        )
    engine = make_engine(db_url)
    try:
        assert [status for _, status, _, _ in statuses(engine)] == ["done"] * 3 + ["skipped"] * 3
    finally:
        engine.dispose()


def test_the_seasons_cap_counts_the_spend_inside_the_seasons_window(db_url: str) -> None:
    """A season opened for the 4th counts the 4th's spend only: the 3rd's (before any season:
    the ledger's life) does not use it up."""
    upgrade(db_url)
    engine = make_engine(db_url)
    try:
        open_season(
            engine,
            Season(
                name="fourth",
                manifest="{}",
                manifest_sha256="0" * 64,
                start_on=date(2025, 11, 4),
                end_on=date(2025, 11, 4),
                opened_at=START_AT - timedelta(days=1),
                closed_at=None,
                config="",
                config_path="openbell.toml",
            ),
        )
    finally:
        engine.dispose()
    engine = replay(db_url, SpendCaps(per_season=SEASON_CAP))
    try:
        found = [(day, status) for day, status, _, _ in statuses(engine)]
        # 4.5 cycles' cap: five cycles run in each window, the sixth is skipped.
        assert found == [(3, "done")] * 5 + [(3, "skipped")] + [(4, "done")] * 5 + [(4, "skipped")]
    finally:
        engine.dispose()
