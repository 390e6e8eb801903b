"""The factor-model baseline over the bundled A-shares, on a real ledger: it holds the top k of
its model's scores at equal weight, the model being the one trained from the bars ended by the
retraining open; a fresh agent (no memo: a restarted daemon, a resumed replay) decides the same.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import date, datetime
from decimal import Decimal

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from openbell.agents.factor_model import FactorModel
from openbell.agents.factor_model.agent import training_cutoff
from openbell.agents.factor_model.features import latest_rows, training_set
from openbell.agents.factor_model.ranker import train
from openbell.agents.toolbox import Toolbox
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Fill, Side, utc
from openbell.markets.universes import Period
from openbell.store import tables
from openbell.store.ledger import Ledger
from openbell_testkit.agents import Arena, make_arena

pytestmark = pytest.mark.sqlite_only

TOP_K = 3
SLOTS = [utc(2025, 10, 10, 1, 30), utc(2025, 10, 13, 1, 30), utc(2025, 10, 14, 1, 30)]


def agent(name: str = "lgbm") -> FactorModel:
    return FactorModel(name=name, market="cn", top_k=TOP_K, retrain_sessions=20, seed=3)


def run(arena: Arena, model: FactorModel, slots: list[datetime]) -> list[Toolbox]:
    async def scenario() -> list[Toolbox]:
        return [await arena.run(model, now) for now in slots]

    return asyncio.run(scenario())


def expected_top(arena: Arena, model: FactorModel, now: datetime) -> list[str]:
    """The top k computed here from the gateway's bars, as the agent should."""

    async def read() -> dict[str, tuple]:  # type: ignore[type-arg]
        return {
            symbol: (await arena.gateway.bars(symbol, "1d", model.lookback, now)).bars
            for symbol in arena.universe.symbols
        }

    bars = asyncio.run(read())
    cutoff = training_cutoff(calendar_for("XSHG"), now, model.retrain_sessions)
    ranker = train(
        training_set(
            bars,
            cutoff,
            label_sessions=model.label_sessions,
            train_sessions=model.train_sessions,
        ),
        model.seed,
    )
    assert ranker is not None
    rows = latest_rows(bars, now)
    scores = ranker.score(rows.values).tolist()
    ranked = sorted(zip(rows.symbols, scores, strict=True), key=lambda pair: -pair[1])
    return [symbol for symbol, _ in ranked[:TOP_K]]


def test_it_holds_the_model_top_k_at_equal_weight(ledger: Ledger) -> None:
    arena = make_arena(ledger, "cn", cash=Decimal(1_000_000))
    model = agent()
    cycles = run(arena, model, SLOTS[:1])
    top = expected_top(arena, model, SLOTS[0])
    assert sorted(arena.holdings(SLOTS[0])) == sorted(top)
    for tools in cycles:
        assert tools.finished
        assert "top 3" in (tools.summary or "")
    # each bought towards a third of NAV (lots of 100 shares round it down a little)
    for order in cycles[0].placed:
        fill = order.outcome
        assert isinstance(fill, Fill)
        assert fill.side.value == "buy"
        assert Decimal("0.30") < fill.quantity * fill.price / Decimal(1_000_000) <= Decimal(1) / 3
    cash = arena.cash(SLOTS[0])
    assert Decimal(0) <= cash < Decimal(1_000_000) * Decimal("0.1")


def test_a_fresh_agent_decides_as_the_one_that_kept_its_model(ledger: Ledger) -> None:
    kept = make_arena(ledger, "cn", cash=Decimal(1_000_000), agent="kept")
    fresh = make_arena(ledger, "cn", cash=Decimal(1_000_000), agent="fresh")
    one = agent("kept")
    by_kept = run(kept, one, SLOTS)
    # a new instance at every slot: nothing remembered between cycles
    by_fresh = [run(fresh, agent("fresh"), [now])[0] for now in SLOTS]
    for first, second in zip(by_kept, by_fresh, strict=True):
        assert [(o.symbol, o.side, o.quantity) for o in first.placed] == [
            (o.symbol, o.side, o.quantity) for o in second.placed
        ]
    assert any(tools.placed for tools in by_kept[1:])  # it trades after its first slot too
    assert kept.holdings(SLOTS[-1]) == fresh.holdings(SLOTS[-1])
    assert kept.cash(SLOTS[-1]) == fresh.cash(SLOTS[-1])


def test_a_holding_that_left_the_universe_is_sold(ledger: Ledger, engine: Engine) -> None:
    arena = make_arena(ledger, "cn", cash=Decimal(1_000_000))
    model = agent()
    run(arena, model, SLOTS[:1])
    held = sorted(arena.holdings(SLOTS[0]))
    assert held
    gone = held[0]
    # The index drops it the day after the first slot: not offered, so never ranked again.
    left = replace(
        arena.universe,
        memberships={gone: Period(from_date=None, until_date=date(2025, 10, 11))},
    )
    later = replace(arena, universe=left)
    (cycle,) = run(later, model, SLOTS[1:2])
    sold = [order for order in cycle.placed if order.symbol == gone]
    assert [(order.side, type(order.outcome)) for order in sold] == [(Side.SELL, Fill)]
    with Session(engine) as session:
        reasons = session.exec(
            select(tables.OrderRow.reason).where(tables.OrderRow.symbol == gone)
        ).all()
    assert reasons[-1] == "left the universe"
    assert gone not in arena.holdings(SLOTS[1])
