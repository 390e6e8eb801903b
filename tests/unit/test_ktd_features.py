"""KTD-Fin's research features, limit bands and pre-trade check, as pure functions: returns,
volatility and scale-free volumes from daily bars, the board and limit band of each A-share board
(none where a market has no limits), and `check_orders` in sequence (lots, T+1, cash, universe)."""

from __future__ import annotations

import statistics
from datetime import timedelta
from decimal import Decimal

import pytest

from openbell.agents.book import Book, Holding
from openbell.agents.ktd.contract import RiskOrder
from openbell.agents.ktd.features import (
    Features,
    correlation,
    features_of,
    limit_band,
    limit_hit,
    rounded,
)
from openbell.agents.ktd.risk import LIMIT_UP_WARNING, check_orders, concentration
from openbell.markets.domain import Bar, Instrument, utc
from openbell.markets.rules import rules_for

D = Decimal
CN = rules_for("cn")


def bars(closes: list[str], volumes: list[int] | None = None) -> list[Bar]:
    """Daily A-share bars (09:30-15:00 Beijing) closing at `closes`, opening at the last close."""
    found = []
    previous = D(closes[0])
    for index, text in enumerate(closes):
        close = D(text)
        start = utc(2025, 9, 1, 1, 30) + timedelta(days=index)
        found.append(
            Bar(
                symbol="600000.SH",
                start_at=start,
                end_at=start + timedelta(hours=5, minutes=30),
                open=previous,
                high=max(previous, close),
                low=min(previous, close),
                close=close,
                volume=D(volumes[index] if volumes else 1000),
            )
        )
        previous = close
    return found


def stock(symbol: str, *, st: bool = False) -> Instrument:
    return Instrument(symbol=symbol, market="cn", currency="CNY", is_st=st)


def test_features_are_the_returns_volatility_and_volumes_of_the_last_bars() -> None:
    closes = [str(10 + i) for i in range(25)]  # 10 .. 34
    volumes = [100] * 24 + [300]
    found = features_of("600000.SH", bars(closes, volumes), CN.timezone)
    assert found is not None
    assert found.last_close == D(34)
    assert found.previous_close == D(33)
    assert found.ret_1d == rounded(D(34) / D(33) - 1)
    assert found.ret_5d == rounded(D(34) / D(29) - 1)
    assert found.ret_20d == rounded(D(34) / D(14) - 1)
    daily = [D(b) / D(a) - 1 for a, b in zip(range(14, 34), range(15, 35), strict=True)]
    assert found.vol_20d == rounded(D(statistics.stdev(daily)))
    assert found.volume_ratio == D(3)  # the last volume over the median of the last 20
    assert found.high_20d_gap == D(0)  # at its high
    assert found.momentum_vol == rounded(found.ret_20d / found.vol_20d)
    assert found.cutoff.isoformat() == "2025-09-25"  # the last bar's day, Beijing time
    assert len(found.returns) == 20


def test_too_few_bars_leave_the_longer_features_out() -> None:
    found = features_of("600000.SH", bars(["10", "11", "12"]), CN.timezone)
    assert found is not None
    assert (found.ret_1d, found.ret_5d, found.ret_20d, found.vol_20d) == (
        rounded(D(12) / D(11) - 1),
        None,
        None,
        None,
    )
    assert found.momentum_vol is None
    assert features_of("600000.SH", [], CN.timezone) is None


@pytest.mark.parametrize(
    ("symbol", "st", "board", "pct", "up", "down"),
    [
        ("600000.SH", False, "main", "0.10", "11.06", "9.05"),
        ("000001.SZ", False, "main", "0.10", "11.06", "9.05"),
        ("300750.SZ", False, "chinext", "0.20", "12.06", "8.04"),
        ("688981.SH", False, "star", "0.20", "12.06", "8.04"),
        ("830799.BJ", False, "beijing", "0.30", "13.07", "7.04"),
        ("600000.SH", True, "main", "0.05", "10.55", "9.55"),
    ],
)
def test_the_limit_band_of_each_board(
    symbol: str, st: bool, board: str, pct: str, up: str, down: str
) -> None:
    band = limit_band(stock(symbol, st=st), CN, D("10.05"))
    assert (band.board, band.limit_pct, band.limit_up, band.limit_down) == (
        board,
        D(pct),
        D(up),
        D(down),
    )


def test_a_market_without_limits_has_no_band() -> None:
    us = rules_for("us")
    band = limit_band(Instrument(symbol="AAPL", market="us", currency="USD"), us, D(100))
    assert (band.board, band.limit_pct, band.limit_up, band.limit_down) == (None, None, None, None)
    no_close = limit_band(stock("600000.SH"), CN, None)
    assert (no_close.board, no_close.limit_pct, no_close.limit_up) == ("main", D("0.10"), None)


def test_a_close_at_the_limit_is_a_limit_hit() -> None:
    up = features_of("600000.SH", bars(["10.00", "11.00"]), CN.timezone)
    down = features_of("600000.SH", bars(["10.00", "9.00"]), CN.timezone)
    inside = features_of("600000.SH", bars(["10.00", "10.99"]), CN.timezone)
    assert up is not None
    assert down is not None
    assert inside is not None
    instrument = stock("600000.SH")
    assert [limit_hit(f, instrument, CN) for f in (up, down, inside)] == ["up", "down", None]


def test_correlation_of_returns() -> None:
    rising = [D("0.01"), D("0.02"), D("-0.01"), D("0.03")]
    assert correlation(rising, rising) == D(1)
    assert correlation(rising, [-r for r in rising]) == D(-1)
    assert correlation(rising, [D(0)] * 4) is None
    assert correlation(rising[:2], rising[:2]) is None


def held_book(cash: str, holdings: dict[str, tuple[int, str]]) -> Book:
    return Book(
        currency="CNY",
        cash=D(cash),
        holdings={
            symbol: Holding(
                symbol=symbol, quantity=D(quantity), mark=D(mark), value=D(quantity) * D(mark)
            )
            for symbol, (quantity, mark) in holdings.items()
        },
    )


def check(
    orders: list[dict[str, object]], book: Book, available: dict[str, int], hits: dict[str, str]
) -> tuple[list[bool], list[str], Book]:
    symbols = {"600000.SH", "601398.SH", "688981.SH"}
    rows, after = check_orders(
        [RiskOrder.model_validate(order) for order in orders],
        book=book,
        served={
            str(o["stock_id"]): stock(str(o["stock_id"])) if o["stock_id"] in symbols else None
            for o in orders
        },
        buyable=frozenset(symbols - {"688981.SH"}),
        closes={"600000.SH": D("10.00"), "601398.SH": D("7.00"), "688981.SH": D("100.00")},
        available={symbol: D(n) for symbol, n in available.items()},
        hits=dict(hits),
        rules=CN,
    )
    return [row.ok for row in rows], [" ".join(row.issues + row.warnings) for row in rows], after


def test_orders_are_checked_in_sequence_against_what_the_ones_before_leave() -> None:
    book = held_book("3000", {"601398.SH": (200, "7.00")})
    oks, notes, after = check(
        [
            {"stock_id": "601398.SH", "side": "SELL", "shares": 200},  # 100 sellable today
            {"stock_id": "601398.SH", "side": "sell", "shares": 100},
            {"stock_id": "600000.SH", "side": "BUY", "shares": 50},  # under a lot
            {"stock_id": "600000.SH", "side": "buy", "shares": 300},  # cash after the sale
            {"stock_id": "600000.SH", "side": "buy", "shares": 400},  # more than is left
            {"stock_id": "688981.SH", "side": "buy", "shares": 100},  # held only: not buyable
            {"stock_id": "IBM", "side": "buy", "shares": 1},
            {"stock_id": "600000.SH", "side": "buy", "target_weight": 0.5},
        ],
        book,
        available={"601398.SH": 100},
        hits={"600000.SH": "up"},
    )
    assert oks == [False, True, False, True, False, False, False, False]
    assert "only 100 of the 200 shares held are sellable today" in notes[0]
    assert "zero lots" in notes[2]
    assert LIMIT_UP_WARNING in notes[3]
    assert "cash" in notes[4]
    assert "not in today's universe" in notes[5]
    assert "not in today's universe" in notes[6]
    assert "already at or above 0.5 of NAV" in notes[7]
    assert after.quantity("601398.SH") == D(100)
    assert after.quantity("600000.SH") == D(300)
    assert D(600) < after.cash < D(700)  # 3,000 + ~700 - ~3,000, fees taken
    cash_weight, largest, hhi = concentration(after)
    nav = after.nav
    assert cash_weight == rounded(after.cash / nav)
    assert largest == rounded(D(3000) / nav)
    assert hhi == rounded((D(700) / nav) ** 2 + (D(3000) / nav) ** 2)


def test_a_features_value_is_frozen() -> None:
    found = features_of("600000.SH", bars(["10", "11"]), CN.timezone)
    assert isinstance(found, Features)
    with pytest.raises(AttributeError):
        found.last_close = D(1)  # type: ignore[misc]
