"""`store.holdings`: each account's cash and open positions at their last marks, on SQLite and
Postgres."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from sqlalchemy import Engine

from openbell.markets.domain import Instrument, Order, Side
from openbell.ops.reports.exporting import positions_record
from openbell.store.holdings import account_holdings
from openbell.store.ledger import Ledger
from openbell.store.records import SnapshotKind
from openbell_testkit.reports import AAPL, BTC, CRYPTO_SLOTS, INITIAL, SLOTS, Built, build_ledger
from openbell_testkit.store import fill_for


def test_holdings_at_their_last_marks(ledger: Ledger, engine: Engine) -> None:
    built: Built = build_ledger(ledger)
    found = {(a.market, a.agent): a for a in account_holdings(engine)}
    assert list(found) == [("us", "alpha"), ("us", "beta"), ("us", "gamma"), ("crypto", "alpha")]
    alpha = found["us", "alpha"]
    assert alpha.account_id == built.accounts["us", "alpha"]
    (aapl,) = alpha.holdings
    assert (aapl.symbol, aapl.quantity, aapl.cost) == ("AAPL", Decimal(10), 10 * AAPL[0])
    assert (aapl.last_mark, aapl.marked_at) == (AAPL[-1], SLOTS[-1])
    assert aapl.value == 10 * AAPL[-1]
    assert alpha.cash == INITIAL - 10 * AAPL[0]
    assert alpha.nav == built.navs["us", "alpha"][-1]
    assert alpha.weight(aapl.value) == aapl.value / alpha.nav
    assert found["us", "gamma"].holdings == ()  # sold out: no position left
    assert found["us", "beta"].nav == INITIAL
    (btc,) = found["crypto", "alpha"].holdings
    assert (btc.last_mark, btc.marked_at) == (BTC[-1], CRYPTO_SLOTS[-1])
    assert [a.agent for a in account_holdings(engine, market="crypto")] == ["alpha"]
    assert [a.market for a in account_holdings(engine, agent="alpha")] == ["us", "crypto"]
    assert account_holdings(engine, agent="nobody") == []


def test_a_holding_bought_after_the_last_snapshot_has_no_mark(
    ledger: Ledger, engine: Engine
) -> None:
    built = build_ledger(ledger)
    account = built.accounts["us", "beta"]
    at = SLOTS[-1] + timedelta(days=1)
    cycle = ledger.claim_cycle(account, at, "test", at + timedelta(minutes=5), at)
    assert cycle is not None
    msft = Instrument(symbol="MSFT", market="us", currency="USD")
    order = Order(instrument=msft, side=Side.BUY, quantity=Decimal(2), placed_at=at)
    ledger.record_order(cycle_id=cycle, seq=0, order=order, outcome=fill_for(order, Decimal(400)))
    (beta,) = account_holdings(engine, market="us", agent="beta")
    (held,) = beta.holdings
    assert (held.symbol, held.last_mark, held.marked_at, held.value) == ("MSFT", None, None, None)
    assert beta.cash == INITIAL - 800
    assert beta.nav is None
    assert beta.weight(beta.cash) is None


def test_a_close_after_the_last_slot_is_named_beside_the_slot_nav(
    ledger: Ledger, engine: Engine
) -> None:
    """Issue 28 (5): the NAV at the last marks and the last slot's NAV are both read, each with
    its instant, so every surface can say which one it shows."""
    built = build_ledger(ledger)
    account = built.accounts["crypto", "alpha"]
    (before,) = account_holdings(engine, market="crypto", agent="alpha")
    assert before.slot_nav == built.navs["crypto", "alpha"][-1] == before.nav
    assert before.slot_nav_at == CRYPTO_SLOTS[-1] == before.marked_at
    close_at = CRYPTO_SLOTS[-1] + timedelta(minutes=30)
    lower = BTC[-1] - 100
    btc_symbol = before.holdings[0].symbol
    ledger.write_nav_snapshot(account, close_at, SnapshotKind.CLOSE, {btc_symbol: lower})
    (after,) = account_holdings(engine, market="crypto", agent="alpha")
    (btc,) = after.holdings
    assert (btc.last_mark, btc.marked_at) == (lower, close_at)
    assert after.marked_at == close_at
    assert after.nav == before.nav - btc.quantity * 100
    assert (after.slot_nav, after.slot_nav_at) == (before.slot_nav, CRYPTO_SLOTS[-1])
    record = positions_record(after)
    assert record["nav_valuation"] == "last_marks"
    assert Decimal(record["nav"]) == after.nav
    assert record["nav_at"] == close_at.isoformat()
    assert Decimal(record["slot_nav"]) == before.slot_nav
    assert record["slot_nav_at"] == CRYPTO_SLOTS[-1].isoformat()
