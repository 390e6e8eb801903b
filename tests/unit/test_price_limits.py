"""A-share price bands as data: the board of every code prefix, each board's band on a previous
close, KTD-Fin's engine buffer (9.5/19.5/29.5 %) as execution enforces it, and its checks."""

from __future__ import annotations

from dataclasses import replace
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
    utc,
)
from openbell.markets.execution import execute
from openbell.markets.price_limits import band_rows, limit_band, percent, with_limit_buffer
from openbell.markets.rules import CN, CRYPTO, US, Board, MarketRules, PriceLimits, board_of

D = Decimal
KTD_FIN = with_limit_buffer(CN, D("0.005"))
CURRENCY = {"us": "USD", "cn": "CNY", "crypto": "USDT"}


def make_instrument(market: str, symbol: str = "600519.SH", *, is_st: bool = False) -> Instrument:
    return Instrument(symbol=symbol, market=market, currency=CURRENCY[market], is_st=is_st)


@pytest.mark.parametrize(
    ("symbol", "board"),
    [
        ("600000.SH", Board.MAIN),
        ("601088.SH", Board.MAIN),
        ("603259.SH", Board.MAIN),
        ("605499.SH", Board.MAIN),
        ("000001.SZ", Board.MAIN),
        ("001979.SZ", Board.MAIN),
        ("002594.SZ", Board.MAIN),
        ("003816.SZ", Board.MAIN),
        ("300750.SZ", Board.CHINEXT),
        ("301269.SZ", Board.CHINEXT),
        ("688981.SH", Board.STAR),
        ("689009.SH", Board.STAR),
        ("830799.BJ", Board.BEIJING),
        ("430047.BJ", Board.BEIJING),
        ("920819.BJ", Board.BEIJING),
    ],
)
def test_the_board_is_the_code_prefix(symbol: str, board: Board) -> None:
    assert board_of(symbol) is board


@pytest.mark.parametrize(
    ("symbol", "is_st", "official", "down", "up", "buffered_down", "buffered_up"),
    [
        # 601088.SH's close before its August 2025 suspension: the bundled bars' 37.56.
        ("601088.SH", False, "0.10", "33.80", "41.32", "33.99", "41.13"),
        ("300750.SZ", False, "0.20", "30.05", "45.07", "30.24", "44.88"),
        ("688981.SH", False, "0.20", "30.05", "45.07", "30.24", "44.88"),
        ("830799.BJ", False, "0.30", "26.29", "48.83", "26.48", "48.64"),
        ("600001.SH", True, "0.05", "35.68", "39.44", "35.87", "39.25"),
        ("300001.SZ", True, "0.20", "30.05", "45.07", "30.24", "44.88"),
    ],
)
def test_each_boards_band_on_a_previous_close(
    symbol: str,
    is_st: bool,
    official: str,
    down: str,
    up: str,
    buffered_down: str,
    buffered_up: str,
) -> None:
    instrument = make_instrument("cn", symbol, is_st=is_st)
    plain = limit_band(instrument, CN, D("37.56"))
    assert plain is not None
    assert (plain.board, plain.official_pct, plain.pct) == (
        board_of(symbol),
        D(official),
        D(official),
    )
    assert (plain.down, plain.up) == (plain.official_down, plain.official_up) == (D(down), D(up))
    buffered = limit_band(instrument, KTD_FIN, D("37.56"))
    assert buffered is not None
    assert buffered.pct == D(official) - D("0.005")
    assert (buffered.official_down, buffered.official_up) == (D(down), D(up))
    assert (buffered.down, buffered.up) == (D(buffered_down), D(buffered_up))


def test_markets_without_limits_have_no_band_and_no_buffer() -> None:
    for rules in (US, CRYPTO):
        assert limit_band(make_instrument(rules.market), rules, D(100)) is None
        with pytest.raises(ValueError, match="no daily price limits"):
            with_limit_buffer(rules, D("0.005"))
    assert with_limit_buffer(CN, None) is CN


def test_a_buffer_must_be_below_every_limit() -> None:
    assert CN.price_limits is not None
    with pytest.raises(ValueError, match=r"below the narrowest limit 0\.05"):
        replace(CN.price_limits, buffer_pct=D("0.05"))
    with pytest.raises(ValueError, match="must not be negative"):
        replace(CN.price_limits, buffer_pct=D("-0.001"))
    assert isinstance(replace(CN.price_limits, buffer_pct=D("0.049")), PriceLimits)


def test_the_band_table_names_each_board_with_its_official_and_enforced_limit() -> None:
    assert KTD_FIN.price_limits is not None
    rows = [
        (row.label, percent(row.official_pct), percent(row.pct))
        for row in band_rows(KTD_FIN.price_limits)
    ]
    assert rows == [
        ("main board (60xxxx, 00xxxx)", "10%", "9.5%"),
        ("ChiNext (30xxxx)", "20%", "19.5%"),
        ("STAR (688xxx, 689xxx)", "20%", "19.5%"),
        ("Beijing (8xxxxx, 4xxxxx, 92xxxx)", "30%", "29.5%"),
        ("ST/*ST stocks on the main board", "5%", "4.5%"),
    ]


def order_at(price: str, rules: MarketRules, side: Side = Side.BUY) -> Fill | Rejection:
    """100 601088.SH at `price` on a previous close of 37.56, mid-session, held and funded."""
    symbol = "601088.SH"
    at = utc(2025, 9, 30, 2, 30)
    account = AccountState(
        market="cn",
        cash=Money(amount=D(1000000), currency="CNY"),
        positions={symbol: Position(symbol=symbol, quantity=D(100))},
    )
    order = Order(
        instrument=make_instrument("cn", symbol), side=side, quantity=D(100), placed_at=at
    )
    return execute(
        order=order,
        account=account,
        price=D(price),
        now=at,
        rules=rules,
        calendar=calendar_for(rules.calendar_id),
        prev_close=D("37.56"),
    )


def refused(outcome: Fill | Rejection, reason: RejectReason) -> str:
    assert isinstance(outcome, Rejection), outcome
    assert outcome.reason is reason
    return outcome.message


def filled(outcome: Fill | Rejection) -> Decimal:
    assert isinstance(outcome, Fill), outcome
    return outcome.price


def test_the_buffer_refuses_inside_the_official_limit_and_fills_stay_within_it() -> None:
    # 601088.SH's open on 2025-08-18 was 41.32, its limit-up: refused with or without a buffer.
    for rules in (CN, KTD_FIN):
        refused(order_at("41.32", rules), RejectReason.LIMIT_UP)
    # 41.13 is +9.5 %: refused under the buffer only; without it a buy fills there.
    message = refused(order_at("41.13", KTD_FIN), RejectReason.LIMIT_UP)
    assert "at or above 41.13 (+9.5% of the previous close 37.56" in message
    assert "limit-up price 41.32" in message
    assert filled(order_at("41.13", CN)) == D("41.16")
    # Inside the buffered band slippage (5 bps) applies, and stays inside the official 41.32.
    assert filled(order_at("41.12", KTD_FIN)) == D("41.15")
    # Sells: -9.5 % is 33.99.
    refused(order_at("33.99", KTD_FIN, Side.SELL), RejectReason.LIMIT_DOWN)
    assert filled(order_at("34.00", KTD_FIN, Side.SELL)) == D("33.98")
    assert filled(order_at("33.99", CN, Side.SELL)) == D("33.97")


def test_an_instrument_keeps_its_special_treatment_flag() -> None:
    st = Instrument(symbol="600001.SH", market="cn", currency="CNY", is_st=True)
    band = limit_band(st, CN, D("10.00"))
    assert band is not None
    assert (band.is_st, band.official_pct) == (True, D("0.05"))
