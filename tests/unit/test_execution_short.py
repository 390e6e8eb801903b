"""Execution of short and cover orders: every refusal, the fills' cash and fees, and the margin
hook. US equities and crypto may short (when the account allows it); A-shares never."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from decimal import Decimal

import pytest

from openbell.markets.calendars import calendar_for
from openbell.markets.domain import (
    AccountState,
    Fill,
    Instrument,
    Money,
    Order,
    Position,
    Rejection,
    RejectReason,
    Side,
    moved_position,
    utc,
)
from openbell.markets.execution import MarginCheck, execute, fees_for, tradable_quantity
from openbell.markets.margin import margin_rejection
from openbell.markets.rules import CRYPTO, US, MarketRules, rules_for, with_costs

D = Decimal
BUY, SELL, SHORT, COVER = Side.BUY, Side.SELL, Side.SHORT, Side.COVER
INSUFFICIENT_MARGIN = RejectReason.INSUFFICIENT_MARGIN
CURRENCY = {"us": "USD", "cn": "CNY", "crypto": "USDT"}
SYMBOL = {"us": "AAPL", "cn": "600519.SH", "crypto": "BTC/USDT"}
OPEN_AT = {"cn": utc(2025, 9, 30, 2, 30), "us": utc(2025, 6, 2, 15), "crypto": utc(2025, 6, 7, 3)}
CLOSED_AT = {"us": utc(2025, 6, 1, 15), "cn": utc(2025, 9, 28, 2, 30)}


HUNDRED = D(100)


def run(
    side: Side,
    quantity: str,
    *,
    market: str = "us",
    price: Decimal | None = HUNDRED,
    cash: str = "10000",
    held: str | None = None,
    others: dict[str, str] | None = None,
    allow_short: bool = True,
    rules: MarketRules | None = None,
    now: datetime | None = None,
    margin: MarginCheck | None = None,
) -> Fill | Rejection:
    rules = rules or rules_for(market)
    instrument = Instrument(symbol=SYMBOL[market], market=market, currency=CURRENCY[market])
    positions = {}
    if held is not None:
        positions[instrument.symbol] = Position(
            symbol=instrument.symbol, quantity=D(held), cost=abs(D(held)) * D(100)
        )
    for symbol, amount in (others or {}).items():
        positions[symbol] = Position(
            symbol=symbol, quantity=D(amount), cost=abs(D(amount)) * HUNDRED
        )
    account = AccountState(
        market=market,
        cash=Money(amount=D(cash), currency=rules.currency),
        positions=positions,
        allow_short=allow_short,
    )
    at = now or OPEN_AT[market]
    return execute(
        order=Order(instrument=instrument, side=side, quantity=D(quantity), placed_at=at),
        account=account,
        price=price,
        now=at,
        rules=rules,
        calendar=calendar_for(rules.calendar_id),
        prev_close=price,
        margin=margin,
    )


def filled(outcome: Fill | Rejection) -> Fill:
    assert isinstance(outcome, Fill), outcome
    return outcome


def rejected(outcome: Fill | Rejection, reason: RejectReason, *needles: str) -> str:
    assert isinstance(outcome, Rejection), outcome
    assert outcome.reason is reason, outcome
    assert outcome.message.endswith("."), outcome.message
    for needle in needles:
        assert needle in outcome.message, outcome.message
    return outcome.message


# -- fills -------------------------------------------------------------------------------------


def test_a_short_receives_the_proceeds_at_the_price_slipped_against_the_seller() -> None:
    fill = filled(run(SHORT, "10", price=D(100)))
    assert (fill.side, fill.quantity, fill.price) == (SHORT, D(10), D("99.95"))
    assert fill.notional == D("999.50")
    assert fill.cash_delta == D("999.50")
    assert fill.signed_quantity == D(-10)


def test_a_cover_pays_at_the_price_slipped_against_the_buyer() -> None:
    fill = filled(run(COVER, "4", held="-10", price=D(100)))
    assert (fill.side, fill.quantity, fill.price) == (COVER, D(4), D("100.05"))
    assert fill.cash_delta == -D("400.20")


def test_stamp_duty_applies_to_a_short_as_a_sale_and_not_to_a_cover() -> None:
    rules = with_costs(US, commission_bps=D(1), stamp_duty_sell_bps=D(10))
    assert fees_for(rules, SHORT, D(1000), "USD") == fees_for(rules, SELL, D(1000), "USD")
    assert fees_for(rules, SHORT, D(1000), "USD") == D("1.10")
    assert fees_for(rules, COVER, D(1000), "USD") == fees_for(rules, BUY, D(1000), "USD")
    assert fees_for(rules, COVER, D(1000), "USD") == D("0.10")
    fill = filled(run(SHORT, "10", rules=rules, price=D(100)))
    assert fill.fees == D("0.10") + D("1.00")  # 1 bp commission + 10 bps stamp on 999.50
    assert fill.cash_delta == fill.notional - fill.fees


def test_short_and_cover_round_down_to_the_step_and_a_cover_is_capped_at_the_short() -> None:
    fill = filled(run(SHORT, "0.123456789", market="crypto", price=D(60000), cash="100000"))
    assert fill.quantity == D("0.12345")
    assert tradable_quantity(
        instrument=Instrument(symbol="AAPL", market="us", currency="USD"),
        side=COVER,
        quantity=D("7.9"),
        held=D(-5),
        rules=US,
    ) == D(5)
    assert filled(run(COVER, "3.9", held="-5")).quantity == D(3)


def test_a_short_may_add_to_a_short_and_a_cover_may_close_it() -> None:
    assert filled(run(SHORT, "5", held="-5")).quantity == D(5)
    assert filled(run(COVER, "5", held="-5")).quantity == D(5)


# -- refusals ----------------------------------------------------------------------------------


def test_a_shares_can_never_be_shorted_or_covered() -> None:
    rejected(
        run(SHORT, "100", market="cn", cash="1000000", price=D(10)),
        RejectReason.SHORTING_NOT_ALLOWED,
        "A-shares cannot be shorted by retail accounts",
    )
    rejected(
        run(COVER, "100", market="cn", cash="1000000", price=D(10)),
        RejectReason.SHORTING_NOT_ALLOWED,
    )


def test_an_account_without_allow_short_cannot_short_but_may_cover() -> None:
    rejected(run(SHORT, "1", allow_short=False), RejectReason.SHORTING_NOT_ALLOWED, "allow_short")
    rejected(
        run(SHORT, "1", market="crypto", allow_short=False, price=D(60000), cash="100000"),
        RejectReason.SHORTING_NOT_ALLOWED,
    )
    assert filled(run(COVER, "1", held="-2", allow_short=False)).quantity == D(1)


def test_a_market_without_shorting_rules_refuses_a_short() -> None:
    rejected(
        run(SHORT, "1", rules=replace(US, shorting=None)),
        RejectReason.SHORTING_NOT_ALLOWED,
        "us market cannot be shorted",
    )


def test_a_buy_on_a_short_is_refused_cover_first() -> None:
    rejected(run(BUY, "1", held="-3"), RejectReason.INSUFFICIENT_POSITION, "short 3", "cover")


def test_a_short_on_a_long_is_refused_sell_first() -> None:
    rejected(run(SHORT, "1", held="3"), RejectReason.INSUFFICIENT_POSITION, "holds 3", "sell")


def test_a_sell_never_goes_below_zero_not_even_on_a_short() -> None:
    rejected(run(SELL, "4", held="3"), RejectReason.INSUFFICIENT_POSITION, "sell at most 3")
    rejected(run(SELL, "1", held="-3"), RejectReason.INSUFFICIENT_POSITION, "cover")
    rejected(run(SELL, "1"), RejectReason.INSUFFICIENT_POSITION, "holds 0")


def test_a_cover_never_goes_above_zero() -> None:
    rejected(run(COVER, "4", held="-3"), RejectReason.INSUFFICIENT_POSITION, "cover at most")
    rejected(run(COVER, "1"), RejectReason.INSUFFICIENT_POSITION, "short 0")
    rejected(run(COVER, "1", held="3"), RejectReason.INSUFFICIENT_POSITION, "not short")


def test_a_cover_needs_the_cash_for_notional_and_fees() -> None:
    rejected(
        run(COVER, "3", held="-3", cash="300", price=D(100)),
        RejectReason.INSUFFICIENT_CASH,
        "Covering 3 AAPL",
    )


def test_short_orders_keep_the_min_notional_the_lot_and_the_market_hours() -> None:
    rejected(
        run(SHORT, "0.0001", market="crypto", price=D(60000), cash="100000"),
        RejectReason.MIN_NOTIONAL,
    )
    rejected(run(SHORT, "0.4"), RejectReason.LOT_SIZE)
    rejected(run(SHORT, "1", now=CLOSED_AT["us"]), RejectReason.MARKET_CLOSED)
    rejected(run(SHORT, "1", price=None), RejectReason.NO_PRICE)


def test_a_short_whose_fees_eat_its_proceeds_is_refused() -> None:
    rules = with_costs(US, commission_min=D(5))
    rejected(run(SHORT, "1", rules=rules, price=D(2)), RejectReason.MIN_NOTIONAL, "fees")


# -- margin ------------------------------------------------------------------------------------


def test_the_default_margin_check_refuses_a_short_past_the_initial_margin() -> None:
    # Equity 1000; shorting 19 at ~100 keeps equity ~1000 >= 0.5 x 1900; 21 would need 1050.
    assert filled(run(SHORT, "19", cash="1000")).quantity == D(19)
    rejected(
        run(SHORT, "21", cash="1000"),
        RejectReason.INSUFFICIENT_MARGIN,
        "equity would be 998.95 USD",
        "requirement of 1050.00 USD",
    )


def test_a_buy_while_a_short_is_open_is_margin_checked() -> None:
    # Cash 3000 holds the proceeds of a short of 20 MSFT at 100 (marked at its average proceeds)
    # and 1000 equity: buying 9 AAPL at ~100 leaves equity ~1000 against 900 + 0.5 x 2000.
    rejected(
        run(BUY, "9", cash="3000", others={"MSFT": "-20"}, price=D(100)),
        RejectReason.INSUFFICIENT_MARGIN,
    )
    assert filled(run(BUY, "9", cash="3000", price=D(100))).quantity == D(9)


@pytest.mark.parametrize(
    ("side", "quantity", "cash", "others"),
    [
        (SHORT, "21", "1000", {}),
        (SHORT, "5", "1000", {"MSFT": "-12"}),
        (BUY, "9", "3000", {"MSFT": "-20"}),
    ],
)
def test_the_default_margin_check_is_the_margin_module_s_rule(
    side: Side, quantity: str, cash: str, others: dict[str, str]
) -> None:
    # Without a hook, execute refuses with `markets.margin.margin_rejection` at the order's price
    # (another holding at its average price): one rule, one sentence.
    seen: list[tuple[AccountState, Fill]] = []

    def spy(account: AccountState, fill: Fill) -> str | None:
        seen.append((account, fill))
        return None

    filled(run(side, quantity, cash=cash, others=others, margin=spy))
    account, fill = seen[0]
    assert US.shorting is not None
    expected = margin_rejection(account, fill, {"AAPL": HUNDRED}, US.shorting)
    assert expected is not None
    message = rejected(run(side, quantity, cash=cash, others=others), INSUFFICIENT_MARGIN)
    assert message == expected.message


def test_the_margin_hook_decides_and_sees_the_fill() -> None:
    seen: list[tuple[AccountState, Fill]] = []

    def refuse(account: AccountState, fill: Fill) -> str | None:
        seen.append((account, fill))
        return "Refused by the margin rule."

    rejected(run(SHORT, "1", margin=refuse), RejectReason.INSUFFICIENT_MARGIN, "margin rule")
    assert seen[0][1].side is SHORT
    assert filled(run(SELL, "1", held="2", margin=refuse)).quantity == D(1)
    assert filled(run(COVER, "1", held="-2", margin=refuse)).quantity == D(1)
    assert filled(run(BUY, "1", margin=refuse)).quantity == D(1)  # no short open
    assert len(seen) == 1


def test_crypto_shorting_follows_its_own_margin() -> None:
    assert CRYPTO.shorting is not None
    fill = filled(run(SHORT, "0.1", market="crypto", price=D(60000), cash="10000"))
    assert fill.cash_delta == fill.notional - fill.fees
    rejected(
        run(SHORT, "0.5", market="crypto", price=D(60000), cash="10000"),
        RejectReason.INSUFFICIENT_MARGIN,
    )


# -- positions move by one rule ------------------------------------------------------------------


def _fill(side: Side, quantity: str, notional: str, fees: str = "0") -> Fill:
    return Fill(
        symbol="AAPL",
        side=side,
        quantity=D(quantity),
        price=D(notional) / D(quantity),
        notional=D(notional),
        fees=D(fees),
        currency="USD",
        filled_at=OPEN_AT["us"],
        price_source="quote",
    )


def test_moved_position_keeps_the_proceeds_of_a_short_as_its_cost() -> None:
    quantity, cost = moved_position(D(0), D(0), _fill(SHORT, "10", "1000", "1"))
    assert (quantity, cost) == (D(-10), D(999))
    quantity, cost = moved_position(quantity, cost, _fill(SHORT, "5", "550", "1"))
    assert (quantity, cost) == (D(-15), D(1548))
    quantity, cost = moved_position(quantity, cost, _fill(COVER, "5", "400", "1"))
    assert (quantity, cost) == (D(-10), D(1032))  # 1548 x 5/15 = 516 of the proceeds closed
    assert moved_position(quantity, cost, _fill(COVER, "10", "900")) == (D(0), D(0))


@pytest.mark.parametrize(
    ("held", "side", "quantity", "needle"),
    [
        ("-1", BUY, "1", "cover it first"),
        ("1", SHORT, "1", "sell it first"),
        ("1", SELL, "2", "holding 1"),
        ("-1", COVER, "2", "short 1"),
        ("0", COVER, "1", "short 0"),
        ("-1", SELL, "1", "holding -1"),
    ],
)
def test_moved_position_refuses_to_cross_zero(
    held: str, side: Side, quantity: str, needle: str
) -> None:
    with pytest.raises(ValueError, match=needle):
        moved_position(D(held), D(100), _fill(side, quantity, "100"))
