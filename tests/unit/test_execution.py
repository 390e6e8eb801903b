"""Paper execution: every market rule as a parameter table of orders and their exact outcomes."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from openbell.markets.calendars import calendar_for
from openbell.markets.domain import (
    AccountState,
    Fill,
    Instrument,
    Lot,
    Money,
    Order,
    Position,
    Rejection,
    RejectReason,
    Side,
    round_quantity,
    utc,
)
from openbell.markets.execution import (
    affordable_quantity,
    execute,
    fees_for,
    sellable_quantity,
    tradable_quantity,
)
from openbell.markets.rules import CN, CRYPTO, US, MarketRules, rules_for

D = Decimal
BUY, SELL = Side.BUY, Side.SELL
CURRENCY = {"us": "USD", "cn": "CNY", "crypto": "USDT"}
#: A trading minute per market: Tuesday 2025-09-30 10:30 Shanghai, Monday 2025-06-02 11:00 New York.
OPEN_AT = {"cn": utc(2025, 9, 30, 2, 30), "us": utc(2025, 6, 2, 15), "crypto": utc(2025, 6, 7, 3)}
DEFAULT_SYMBOL = {"cn": "600519.SH", "us": "AAPL", "crypto": "BTC/USDT"}
TEN = Decimal("10.00")


def make_instrument(market: str = "cn", symbol: str | None = None, **overrides: Any) -> Instrument:
    return Instrument(
        symbol=symbol or DEFAULT_SYMBOL[market],
        market=market,
        currency=CURRENCY[market],
        **overrides,
    )


#: A synthetic index fund: fractional units, with its own lot replacing the market's 100 shares.
INDEX_FUND = make_instrument("cn", "000016.SH", quantity_step=D("0.0001"), lot_size=D("0.0001"))


def make_position(symbol: str, quantity: str, *buys: tuple[str, datetime]) -> Position:
    lots = tuple(Lot(quantity=D(amount), acquired_at=at) for amount, at in buys)
    return Position(symbol=symbol, quantity=D(quantity), recent_buys=lots)


def run(
    side: Side,
    quantity: str,
    *,
    market: str = "cn",
    price: Decimal | None = TEN,
    cash: str = "1000000",
    held: str | Position | None = None,
    now: datetime | None = None,
    prev_close: Decimal | None = TEN,
    rules: MarketRules | None = None,
    instrument: Instrument | None = None,
) -> Fill | Rejection:
    """Execute one order with defaults: a mid-session order in a well-funded account."""
    rules = rules or rules_for(market)
    instrument = instrument or make_instrument(market)
    at = now or OPEN_AT[market]
    positions = {}
    if isinstance(held, Position):
        positions[held.symbol] = held
    elif held is not None:
        positions[instrument.symbol] = Position(symbol=instrument.symbol, quantity=D(held))
    account = AccountState(
        market=rules.market,
        cash=Money(amount=D(cash), currency=rules.currency),
        positions=positions,
    )
    order = Order(instrument=instrument, side=side, quantity=D(quantity), placed_at=at)
    return execute(
        order=order,
        account=account,
        price=price,
        now=at,
        rules=rules,
        calendar=calendar_for(rules.calendar_id),
        prev_close=prev_close,
    )


def filled(outcome: Fill | Rejection) -> Fill:
    assert isinstance(outcome, Fill), outcome
    return outcome


def rejected(outcome: Fill | Rejection, reason: RejectReason) -> Rejection:
    assert isinstance(outcome, Rejection), outcome
    assert outcome.reason is reason
    assert outcome.message.endswith(".")
    return outcome


# -- quantities: lots, odd lots, integer shares, crypto steps ----------------------------------


@pytest.mark.parametrize(
    ("market", "side", "quantity", "held", "fills"),
    [
        pytest.param("cn", BUY, "150", None, D(100), id="cn-buy-150-fills-100"),
        pytest.param("cn", BUY, "100", None, D(100), id="cn-buy-one-lot"),
        pytest.param("cn", BUY, "299.9", None, D(200), id="cn-buy-fraction-floors"),
        pytest.param("cn", SELL, "150", "150", D(150), id="cn-sell-whole-odd-holding"),
        pytest.param("cn", SELL, "50", "150", D(50), id="cn-sell-odd-remainder-alone"),
        pytest.param("cn", SELL, "250", "250", D(250), id="cn-sell-lots-plus-odd"),
        pytest.param("cn", SELL, "170", "250", D(100), id="cn-partial-odd-sell-floors"),
        pytest.param("cn", SELL, "230", "300", D(200), id="cn-sell-even-holding-floors"),
        pytest.param("us", BUY, "10.7", None, D(10), id="us-buy-floors-to-share"),
        pytest.param("us", SELL, "3.9", "5", D(3), id="us-sell-floors-to-share"),
        pytest.param("us", SELL, "5", "5", D(5), id="us-sell-all"),
        pytest.param("crypto", BUY, "0.123456789", None, D("0.12345"), id="crypto-step-floors"),
        pytest.param("crypto", SELL, "0.5", "0.5", D("0.5"), id="crypto-sell-all"),
    ],
)
def test_quantity_rounding(
    market: str, side: Side, quantity: str, held: str | None, fills: Decimal
) -> None:
    price = D(60000) if market == "crypto" else D("10.00")
    fill = filled(run(side, quantity, market=market, held=held, price=price))
    assert fill.quantity == fills


@pytest.mark.parametrize(
    ("market", "side", "quantity", "held", "reason", "hint"),
    [
        pytest.param("cn", BUY, "50", None, RejectReason.LOT_SIZE, "of 100", id="cn-buy-50"),
        pytest.param(
            "cn", SELL, "30", "250", RejectReason.LOT_SIZE, "odd remainder 50", id="cn-sell-30"
        ),
        pytest.param("us", BUY, "0.5", None, RejectReason.LOT_SIZE, "of 1", id="us-half-share"),
        pytest.param(
            "crypto", BUY, "0.000009", None, RejectReason.LOT_SIZE, "0.00001", id="below-step"
        ),
        pytest.param(
            "cn", SELL, "200", "150", RejectReason.INSUFFICIENT_POSITION, "holds 150", id="cn-over"
        ),
        pytest.param(
            "cn", SELL, "50", None, RejectReason.INSUFFICIENT_POSITION, "holds 0", id="cn-none"
        ),
        pytest.param(
            "us", SELL, "5.5", "5", RejectReason.INSUFFICIENT_POSITION, "at most 5", id="us-over"
        ),
    ],
)
def test_quantity_rejections(
    market: str, side: Side, quantity: str, held: str | None, reason: RejectReason, hint: str
) -> None:
    price = D(60000) if market == "crypto" else D("10.00")
    outcome = rejected(run(side, quantity, market=market, held=held, price=price), reason)
    assert hint in outcome.message


@pytest.mark.parametrize(
    ("step", "quantity", "expected"),
    [
        pytest.param(D("0.00001"), D("0.123456789"), D("0.12345"), id="crypto-default-step"),
        pytest.param(D("0.001"), D("0.9999"), D("0.999"), id="coarser-step"),
        pytest.param(D(100), D(199), D(100), id="a-share-lot"),
        pytest.param(D(1), D("7.999"), D(7), id="whole-shares"),
        pytest.param(D(1), D("0.5"), D(0), id="rounds-to-zero"),
    ],
)
def test_round_quantity_rounds_down(step: Decimal, quantity: Decimal, expected: Decimal) -> None:
    assert round_quantity(quantity, step) == expected


@pytest.mark.parametrize(
    ("rules", "instrument", "side", "quantity", "held", "expected"),
    [
        pytest.param(CN, make_instrument("cn"), BUY, "1234", "0", D(1200), id="cn-buy"),
        pytest.param(CN, make_instrument("cn"), SELL, "1000", "350", D(350), id="cn-sell-capped"),
        pytest.param(CN, make_instrument("cn"), SELL, "149", "150", D(100), id="cn-sell-floors"),
        pytest.param(US, make_instrument("us"), BUY, "3.2", "0", D(3), id="us"),
        pytest.param(
            CRYPTO,
            make_instrument("crypto", "ETH/USDT", quantity_step=D("0.001")),
            BUY,
            "1.23456",
            "0",
            D("1.234"),
            id="crypto-instrument-step",
        ),
        pytest.param(CN, INDEX_FUND, BUY, "34.56789", "0", D("34.5678"), id="cn-fund-lot-buy"),
        pytest.param(CN, INDEX_FUND, SELL, "10.12345", "20", D("10.1234"), id="cn-fund-lot-sell"),
    ],
)
def test_tradable_quantity(
    rules: MarketRules,
    instrument: Instrument,
    side: Side,
    quantity: str,
    held: str,
    expected: Decimal,
) -> None:
    assert (
        tradable_quantity(
            instrument=instrument, side=side, quantity=D(quantity), held=D(held), rules=rules
        )
        == expected
    )


# -- crypto minimum notional -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quantity", "price", "instrument", "outcome"),
    [
        # 0.0001 BTC at 60000 slipped to 60030: 6.003 USDT < 10.
        pytest.param("0.0001", "60000", make_instrument("crypto"), None, id="below-default-min"),
        pytest.param("0.0002", "60000", make_instrument("crypto"), D("12.006"), id="above-min"),
        pytest.param(
            "0.0001",
            "60000",
            make_instrument("crypto", min_notional=D(5)),
            D("6.003"),
            id="instrument-min-override",
        ),
    ],
)
def test_crypto_min_notional(
    quantity: str, price: str, instrument: Instrument, outcome: Decimal | None
) -> None:
    result = run(BUY, quantity, market="crypto", price=D(price), instrument=instrument)
    if outcome is None:
        assert "below the minimum order value of 10 USDT" in (
            rejected(result, RejectReason.MIN_NOTIONAL).message
        )
    else:
        assert filled(result).notional == outcome


# -- slippage and ticks -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("market", "side", "price", "fill_price", "instrument"),
    [
        pytest.param("us", BUY, "100.00", D("100.05"), None, id="us-buy-5bps-up"),
        pytest.param("us", SELL, "100.00", D("99.95"), None, id="us-sell-5bps-down"),
        pytest.param("us", BUY, "10.00", D("10.01"), None, id="us-buy-rounds-up-to-tick"),
        pytest.param("us", SELL, "10.00", D("9.99"), None, id="us-sell-rounds-down-to-tick"),
        pytest.param("cn", BUY, "10.50", D("10.51"), None, id="cn-buy-rounds-up"),
        pytest.param("crypto", BUY, "60000", D("60030.00000000"), None, id="crypto-buy"),
        pytest.param(
            "crypto",
            SELL,
            "2500.01",
            D("2498.75"),
            make_instrument("crypto", "ETH/USDT", price_tick=D("0.01")),
            id="crypto-sell-instrument-tick",
        ),
    ],
)
def test_slippage_moves_the_price_against_the_trader(
    market: str, side: Side, price: str, fill_price: Decimal, instrument: Instrument | None
) -> None:
    symbol = (instrument or make_instrument(market)).symbol
    outcome = run(
        side,
        "100" if market == "cn" else "1",
        market=market,
        price=D(price),
        held=make_position(symbol, "100"),
        prev_close=D(price),
        instrument=instrument,
    )
    assert filled(outcome).price == fill_price


# -- price limits (A-shares) -------------------------------------------------------------------


LIMIT_CASES = [
    # (symbol, is_st, limit-down, limit-up) with a previous close of 100.00: at that price 5 bps
    # of slippage is more than a tick, so a fill just inside a limit would cross it.
    ("600519.SH", False, D("90.00"), D("110.00")),
    ("000001.SZ", False, D("90.00"), D("110.00")),
    ("300750.SZ", False, D("80.00"), D("120.00")),
    ("688981.SH", False, D("80.00"), D("120.00")),
    ("830799.BJ", False, D("70.00"), D("130.00")),
    ("430047.BJ", False, D("70.00"), D("130.00")),
    ("920819.BJ", False, D("70.00"), D("130.00")),
    ("600001.SH", True, D("95.00"), D("105.00")),
    ("300001.SZ", True, D("80.00"), D("120.00")),
]
TICK = D("0.01")


def _limit_params() -> list[Any]:
    params = []
    for symbol, is_st, down, up in LIMIT_CASES:
        tag = f"{symbol}{'-st' if is_st else ''}"
        params += [
            pytest.param(
                symbol, is_st, BUY, up, RejectReason.LIMIT_UP, None, id=f"{tag}-buy-at-up"
            ),
            pytest.param(
                symbol, is_st, BUY, up + TICK, RejectReason.LIMIT_UP, None, id=f"{tag}-buy-above"
            ),
            pytest.param(symbol, is_st, BUY, up - TICK, None, up, id=f"{tag}-buy-inside-capped"),
            pytest.param(
                symbol, is_st, SELL, down, RejectReason.LIMIT_DOWN, None, id=f"{tag}-sell-at-down"
            ),
            pytest.param(
                symbol, is_st, SELL, down + TICK, None, down, id=f"{tag}-sell-inside-floored"
            ),
        ]
    return params


@pytest.mark.parametrize(
    ("symbol", "is_st", "side", "price", "reason", "fill_price"), _limit_params()
)
def test_price_limits(
    symbol: str,
    is_st: bool,
    side: Side,
    price: Decimal,
    reason: RejectReason | None,
    fill_price: Decimal | None,
) -> None:
    instrument = make_instrument("cn", symbol, is_st=is_st)
    outcome = run(
        side,
        "100",
        price=price,
        instrument=instrument,
        held=make_position(symbol, "100"),
        prev_close=D("100.00"),
    )
    if reason is not None:
        assert "previous close 100.00" in rejected(outcome, reason).message
    else:
        # Slippage would cross the limit; the fill stays at the limit price instead.
        assert filled(outcome).price == fill_price


def test_well_inside_the_limits_slippage_applies_unchanged() -> None:
    # 105.00 is inside +10% of 100.00: 105.0525 rounds up to 105.06, far from the 110.00 limit.
    assert filled(run(BUY, "100", price=D("105.00"), prev_close=D("100.00"))).price == D("105.06")


@pytest.mark.parametrize(
    "prev_close",
    [
        pytest.param(None, id="missing"),
        pytest.param(D(0), id="zero"),
        pytest.param(D("NaN"), id="nan"),
    ],
)
def test_a_shares_without_a_previous_close_are_not_traded(prev_close: Decimal | None) -> None:
    outcome = rejected(run(BUY, "100", prev_close=prev_close), RejectReason.NO_PRICE)
    assert "previous close" in outcome.message


def test_us_and_crypto_ignore_prev_close() -> None:
    # +50% over the "previous close" is no limit outside China.
    assert filled(run(BUY, "1", market="us", price=D(150), prev_close=D(100))).price == D("150.08")


# -- T+1 (A-shares) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bought_at", "now", "sell", "outcome"),
    [
        pytest.param(
            utc(2025, 9, 30, 1, 45),
            utc(2025, 9, 30, 6, 0),
            "1000",
            RejectReason.T_PLUS_1,
            id="same-session-all-rejected",
        ),
        pytest.param(
            utc(2025, 9, 30, 1, 45),
            utc(2025, 9, 30, 6, 0),
            "600",
            D(600),
            id="same-session-older-shares-sell",
        ),
        pytest.param(
            utc(2025, 9, 30, 5, 30),
            utc(2025, 10, 9, 1, 30),
            "1000",
            D(1000),
            id="holiday-sellable-at-next-session-open",
        ),
        pytest.param(
            utc(2025, 9, 26, 6, 0),
            utc(2025, 9, 29, 1, 30),
            "1000",
            D(1000),
            id="weekend-sellable-monday",
        ),
        pytest.param(
            utc(2025, 9, 26, 6, 0),
            utc(2025, 9, 26, 6, 30),
            "700",
            RejectReason.T_PLUS_1,
            id="friday-buy-friday-sell",
        ),
    ],
)
def test_t_plus_1(
    bought_at: datetime, now: datetime, sell: str, outcome: RejectReason | Decimal
) -> None:
    # 1000 held: 600 bought long ago, 400 bought at `bought_at`.
    held = make_position("600519.SH", "1000", ("400", bought_at))
    result = run(SELL, sell, held=held, now=now)
    if isinstance(outcome, RejectReason):
        assert "Only 600 of the 1000" in rejected(result, outcome).message
    else:
        assert filled(result).quantity == outcome


@pytest.mark.parametrize(
    ("now", "sellable"),
    [
        pytest.param(utc(2025, 9, 30, 6, 59), D(0), id="same-session-before-close"),
        pytest.param(utc(2025, 10, 3, 2, 0), D(0), id="during-golden-week"),
        pytest.param(utc(2025, 10, 9, 1, 30), D(300), id="next-session-open"),
    ],
)
def test_sellable_quantity_across_the_national_day_holiday(
    now: datetime, sellable: Decimal
) -> None:
    position = make_position("600519.SH", "300", ("300", utc(2025, 9, 30, 1, 30)))
    assert (
        sellable_quantity(position=position, now=now, rules=CN, calendar=calendar_for("XSHG"))
        == sellable
    )


def test_us_has_no_settlement_lock() -> None:
    held = make_position("AAPL", "10", ("10", utc(2025, 6, 2, 14)))
    assert filled(run(SELL, "10", market="us", held=held)).quantity == D(10)


# -- fees and cash -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "side", "notional", "fees"),
    [
        pytest.param(CN, BUY, "10000.00", D("5.10"), id="cn-buy-commission-minimum"),
        pytest.param(CN, SELL, "10000.00", D("10.10"), id="cn-sell-minimum-plus-stamp"),
        pytest.param(CN, BUY, "100000.00", D("26.00"), id="cn-buy-above-minimum"),
        pytest.param(CN, SELL, "100000.00", D("76.00"), id="cn-sell-stamp-duty"),
        # 5.001645 + 10.003290 + 0.2000658: each part rounds down (15.20); the sum would be 15.21
        pytest.param(CN, SELL, "20006.58", D("15.20"), id="cn-sell-each-part-rounded"),
        pytest.param(CN, BUY, "999.00", D("5.01"), id="cn-small-buy"),
        pytest.param(US, BUY, "10000.00", D("0.00"), id="us-no-commission"),
        pytest.param(US, SELL, "10000.00", D("0.00"), id="us-no-stamp-duty"),
        pytest.param(CRYPTO, BUY, "1234.5", D("1.23450000"), id="crypto-taker-10bps"),
        pytest.param(CRYPTO, SELL, "0.00999999", D("0.00001000"), id="crypto-rounds-half-up"),
    ],
)
def test_fees_for(rules: MarketRules, side: Side, notional: str, fees: Decimal) -> None:
    computed = fees_for(rules, side, D(notional), rules.currency)
    assert computed == fees
    assert computed.as_tuple().exponent == fees.as_tuple().exponent


@pytest.mark.parametrize(
    ("side", "notional", "fees", "cash_delta"),
    [
        # buy 100 at 10.00 -> 10.01: notional 1001.00, commission 5.00 (minimum), transfer 0.01
        pytest.param(BUY, D("1001.00"), D("5.01"), D("-1006.01"), id="buy"),
        # sell 100 at 10.00 -> 9.99: notional 999.00, commission 5.00, stamp 0.50, transfer 0.01
        pytest.param(SELL, D("999.00"), D("5.51"), D("993.49"), id="sell"),
    ],
)
def test_a_share_fill_records_exact_amounts(
    side: Side, notional: Decimal, fees: Decimal, cash_delta: Decimal
) -> None:
    now = utc(2025, 9, 30, 2, 30)
    fill = filled(run(side, "100", held="100", now=now))
    assert (fill.notional, fill.fees, fill.cash_delta) == (notional, fees, cash_delta)
    assert (fill.symbol, fill.currency, fill.filled_at, fill.price_source) == (
        "600519.SH",
        "CNY",
        now,
        "quote",
    )


@pytest.mark.parametrize(
    ("market", "quantity", "cash", "outcome"),
    [
        pytest.param("cn", "100", "1006.01", None, id="cn-exactly-enough"),
        pytest.param("cn", "100", "1006.00", RejectReason.INSUFFICIENT_CASH, id="cn-a-cent-short"),
        pytest.param(
            "cn", "100", "1001.00", RejectReason.INSUFFICIENT_CASH, id="cn-fits-without-fees"
        ),
        pytest.param("us", "10", "100.10", None, id="us-exactly-enough"),
        pytest.param("us", "10", "100.09", RejectReason.INSUFFICIENT_CASH, id="us-a-cent-short"),
        # 0.1 BTC at 60030: notional 6003, taker fee 6.003
        pytest.param("crypto", "0.1", "6009.003", None, id="crypto-exactly-enough"),
        pytest.param(
            "crypto", "0.1", "6005", RejectReason.INSUFFICIENT_CASH, id="crypto-fits-without-fee"
        ),
    ],
)
def test_cash_must_cover_notional_and_fees(
    market: str, quantity: str, cash: str, outcome: RejectReason | None
) -> None:
    price = D(60000) if market == "crypto" else D("10.00")
    result = run(BUY, quantity, market=market, cash=cash, price=price)
    if outcome is None:
        assert filled(result).cash_delta == -D(cash)
    else:
        assert f"the account has {cash}" in rejected(result, outcome).message


@pytest.mark.parametrize(
    ("rules", "instrument", "price", "cash", "expected"),
    [
        # 9900 * 10.01 = 99099.00 + 24.77 commission + 0.99 transfer = 99124.76; 10000 is 100100
        pytest.param(CN, make_instrument("cn"), "10.01", "100000", D(9900), id="cn-lots"),
        # one lot costs 1006.01 with the CNY 5 minimum
        pytest.param(CN, make_instrument("cn"), "10.01", "1006.00", D(0), id="cn-minimum-fee"),
        # 200 shares cost 2002.00 + 5.00 + 0.02 = 2007.02: one cent short, so one lot less
        pytest.param(CN, make_instrument("cn"), "10.01", "2007.01", D(100), id="cn-steps-down"),
        pytest.param(US, make_instrument("us"), "100.05", "1000", D(9), id="us"),
        # 1000 / 60030 / 1.001 = 0.016641... -> 0.01664 (0.01665 would cost 1000.4989995)
        pytest.param(
            CRYPTO, make_instrument("crypto"), "60030", "1000", D("0.01664"), id="crypto-step"
        ),
        # 34.4737 units cost 99973.73 + 24.99 commission + 1.00 transfer = 99999.72; one more
        # step (34.4738) costs 99974.02 + 25.99 = 100000.01
        pytest.param(CN, INDEX_FUND, "2900.00", "100000", D("34.4737"), id="cn-fund-lot"),
    ],
)
def test_affordable_quantity(
    rules: MarketRules, instrument: Instrument, price: str, cash: str, expected: Decimal
) -> None:
    assert (
        affordable_quantity(instrument=instrument, price=D(price), cash=D(cash), rules=rules)
        == expected
    )


# -- price, market, calendar --------------------------------------------------------------------


@pytest.mark.parametrize(
    "price",
    [
        pytest.param(None, id="none"),
        pytest.param(D(0), id="zero"),
        pytest.param(D("-1.50"), id="negative"),
        pytest.param(D("NaN"), id="nan"),
        pytest.param(D("sNaN"), id="signalling-nan"),
        pytest.param(D("Infinity"), id="infinity"),
    ],
)
def test_unusable_prices_are_rejected(price: Decimal | None) -> None:
    outcome = rejected(run(BUY, "1", market="us", price=price), RejectReason.NO_PRICE)
    assert "no usable price for AAPL" in outcome.message


@pytest.mark.parametrize(
    ("market", "now"),
    [
        pytest.param("us", utc(2025, 6, 7, 15), id="us-saturday"),
        pytest.param("us", utc(2025, 6, 2, 13, 29), id="us-before-open"),
        pytest.param("us", utc(2025, 6, 2, 20), id="us-at-close"),
        pytest.param("cn", utc(2025, 9, 30, 4, 0), id="cn-lunch-break"),
        pytest.param("cn", utc(2025, 10, 2, 2, 0), id="cn-national-day"),
        pytest.param("cn", utc(2025, 9, 27, 2, 0), id="cn-saturday"),
    ],
)
def test_closed_market_rejects(market: str, now: datetime) -> None:
    outcome = rejected(run(BUY, "100", market=market, now=now), RejectReason.MARKET_CLOSED)
    assert f"is closed at {now.isoformat()}" in outcome.message


@pytest.mark.parametrize(
    ("market", "now"),
    [
        pytest.param("us", utc(2025, 6, 2, 13, 30), id="us-open-minute"),
        pytest.param("cn", utc(2025, 9, 30, 5, 0), id="cn-afternoon-reopen"),
        pytest.param("crypto", utc(2025, 6, 8, 23, 59), id="crypto-sunday-night"),
    ],
)
def test_open_market_fills(market: str, now: datetime) -> None:
    price = D(60000) if market == "crypto" else D("10.00")
    quantity = "1" if market == "crypto" else "100"
    assert filled(run(BUY, quantity, market=market, now=now, price=price)).filled_at == now


@pytest.mark.parametrize(
    ("rules", "instrument"),
    [
        pytest.param(US, make_instrument("crypto"), id="crypto-pair-in-us-account"),
        pytest.param(CN, make_instrument("us"), id="us-stock-in-cn-account"),
        pytest.param(
            US,
            Instrument(symbol="AAPL", market="us", currency="CNY"),
            id="us-stock-priced-in-cny",
        ),
    ],
)
def test_wrong_market_rejects(rules: MarketRules, instrument: Instrument) -> None:
    outcome = run(BUY, "100", rules=rules, instrument=instrument, now=OPEN_AT[rules.market])
    assert (
        f"order only {rules.market} symbols" in rejected(outcome, RejectReason.WRONG_MARKET).message
    )


def test_an_account_of_another_market_rejects() -> None:
    order = Order(
        instrument=make_instrument("us"), side=BUY, quantity=D(1), placed_at=OPEN_AT["us"]
    )
    account = AccountState(market="cn", cash=Money(amount=D(1000), currency="CNY"))
    outcome = execute(
        order=order,
        account=account,
        price=D(100),
        now=OPEN_AT["us"],
        rules=US,
        calendar=calendar_for("XNYS"),
    )
    rejected(outcome, RejectReason.WRONG_MARKET)


def test_fill_records_the_price_source() -> None:
    now = OPEN_AT["us"]
    order = Order(instrument=make_instrument("us"), side=BUY, quantity=D(1), placed_at=now)
    account = AccountState(market="us", cash=Money(amount=D(1000), currency="USD"))
    fill = execute(
        order=order,
        account=account,
        price=D(100),
        now=now,
        rules=US,
        calendar=calendar_for("XNYS"),
        price_source="bar_open:1m",
    )
    assert filled(fill).price_source == "bar_open:1m"


# -- wiring mistakes raise; domain values validate themselves -----------------------------------


def _execute_with(**overrides: Any) -> Fill | Rejection:
    now = OPEN_AT["us"]
    arguments: dict[str, Any] = {
        "order": Order(instrument=make_instrument("us"), side=BUY, quantity=D(1), placed_at=now),
        "account": AccountState(market="us", cash=Money(amount=D(1000), currency="USD")),
        "price": D(100),
        "now": now,
        "rules": US,
        "calendar": calendar_for("XNYS"),
    }
    return execute(**{**arguments, **overrides})


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        pytest.param(
            {"now": datetime(2025, 6, 2, 15)},  # noqa: DTZ001
            ValueError,
            "timezone-aware",
            id="naive-now",
        ),
        pytest.param({"now": utc(2025, 6, 2, 14)}, ValueError, "cannot fill earlier", id="early"),
        pytest.param(
            {"calendar": calendar_for("XSHG")}, ValueError, "not the us calendar", id="calendar"
        ),
        pytest.param({"price": 100.0}, TypeError, "must be a Decimal", id="float-price"),
    ],
)
def test_wiring_mistakes_raise(
    overrides: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        _execute_with(**overrides)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(
            lambda: Order(
                instrument=make_instrument("us"),
                side=BUY,
                quantity=D(1),
                placed_at=datetime(2025, 6, 2, 15),  # noqa: DTZ001
            ),
            "timezone-aware",
            id="naive-placed-at",
        ),
        pytest.param(
            lambda: Order(
                instrument=make_instrument("us"), side=BUY, quantity=D(-5), placed_at=OPEN_AT["us"]
            ),
            "must be positive",
            id="negative-quantity",
        ),
        pytest.param(
            lambda: Order(
                instrument=make_instrument("us"), side=BUY, quantity=D(0), placed_at=OPEN_AT["us"]
            ),
            "must be positive",
            id="zero-quantity",
        ),
        pytest.param(lambda: Money(amount=D(1), currency="EUR"), "unknown currency", id="eur"),
        pytest.param(
            lambda: Instrument(symbol="SAP", market="us", currency="EUR"),
            "unknown currency",
            id="instrument-currency",
        ),
        pytest.param(
            lambda: make_instrument("cn", lot_size=D(0)), "must be positive", id="zero-lot-size"
        ),
        pytest.param(
            lambda: Lot(quantity=D(100), acquired_at=datetime(2025, 9, 30, 9, 30)),  # noqa: DTZ001
            "timezone-aware",
            id="naive-lot",
        ),
        pytest.param(
            lambda: Position(symbol="AAPL", quantity=D("NaN")), "finite", id="nan-quantity"
        ),
        pytest.param(
            lambda: Position(symbol="AAPL", quantity=D(-1), cost=D(-1)),
            "must not be negative",
            id="short-negative-cost",
        ),
    ],
)
def test_domain_values_are_validated(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()
