"""Market rules as data: the per-market values, A-share boards and price limits, overrides."""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Decimal
from typing import Any

import pytest

from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Instrument, round_to_tick
from openbell.markets.rules import (
    CN,
    CRYPTO,
    US,
    Board,
    FeeSchedule,
    MarketRules,
    PriceLimits,
    a_share_code,
    board_of,
    limit_prices,
    min_notional_for,
    price_limit_pct,
    price_tick_for,
    quantity_step_for,
    rules_for,
    with_costs,
)

D = Decimal


@pytest.mark.parametrize(
    ("market", "expected"),
    [
        pytest.param("us", US, id="us"),
        pytest.param("cn", CN, id="cn"),
        pytest.param("crypto", CRYPTO, id="crypto"),
    ],
)
def test_rules_for_returns_the_market_constant(market: str, expected: MarketRules) -> None:
    assert rules_for(market) is expected
    assert rules_for(market).market == market


def test_rules_for_refuses_an_unknown_market() -> None:
    with pytest.raises(ValueError, match="unknown market 'hk'"):
        rules_for("hk")


@pytest.mark.parametrize(
    ("rules", "values"),
    [
        pytest.param(
            US,
            ("XNYS", "America/New_York", "USD", D(1), D(1), D(0), 0, D(5), "QQQ", "nasdaq100"),
            id="us",
        ),
        pytest.param(
            CN,
            ("XSHG", "Asia/Shanghai", "CNY", D(100), D(1), D(0), 1, D(5), "000016.SH", "sse50"),
            id="cn",
        ),
        pytest.param(
            CRYPTO,
            ("24/7", "UTC", "USDT", None, D("0.00001"), D(10), 0, D(5), "CD5", "crypto10"),
            id="crypto",
        ),
    ],
)
def test_market_values(rules: MarketRules, values: tuple[object, ...]) -> None:
    assert (
        rules.calendar_id,
        rules.timezone,
        rules.currency,
        rules.lot_size,
        rules.quantity_step,
        rules.min_notional,
        rules.settlement_days,
        rules.slippage_bps,
        rules.benchmark,
        rules.universe,
    ) == values


@pytest.mark.parametrize(
    ("rules", "fees"),
    [
        pytest.param(US, FeeSchedule(), id="us-no-commission"),
        pytest.param(
            CN,
            FeeSchedule(
                commission_bps=D("2.5"),
                commission_min=D(5),
                stamp_duty_sell_bps=D(5),
                transfer_fee_bps=D("0.1"),
            ),
            id="cn",
        ),
        pytest.param(CRYPTO, FeeSchedule(commission_bps=D(10)), id="crypto-taker"),
    ],
)
def test_fee_schedules(rules: MarketRules, fees: FeeSchedule) -> None:
    assert rules.fees == fees


@pytest.mark.parametrize(
    ("symbol", "code", "board"),
    [
        pytest.param("600519.SH", "600519", Board.MAIN, id="sh-main-60"),
        pytest.param("000001.SZ", "000001", Board.MAIN, id="sz-main-00"),
        pytest.param("002594.SZ", "002594", Board.MAIN, id="sz-main-002"),
        pytest.param("300750.SZ", "300750", Board.CHINEXT, id="chinext-30"),
        pytest.param("688981.SH", "688981", Board.STAR, id="star-688"),
        pytest.param("830799.BJ", "830799", Board.BEIJING, id="bj-8"),
        pytest.param("430047.BJ", "430047", Board.BEIJING, id="bj-4"),
        pytest.param("920819.BJ", "920819", Board.BEIJING, id="bj-92"),
        pytest.param("688981", "688981", Board.STAR, id="bare-code"),
        pytest.param("600519.sh", "600519", Board.MAIN, id="lower-case-suffix"),
        pytest.param("900901.SH", "900901", Board.MAIN, id="b-share-as-main"),
    ],
)
def test_board_of(symbol: str, code: str, board: Board) -> None:
    assert a_share_code(symbol) == code
    assert board_of(symbol) == board


@pytest.mark.parametrize(
    "symbol",
    [
        pytest.param("AAPL", id="us-ticker"),
        pytest.param("60051.SH", id="five-digits"),
        pytest.param("600519.HK", id="unknown-exchange"),
        pytest.param("BTC/USDT", id="crypto-pair"),
    ],
)
def test_a_share_code_refuses_other_symbols(symbol: str) -> None:
    with pytest.raises(ValueError, match="not an A-share symbol"):
        a_share_code(symbol)


def _instrument(symbol: str, market: str = "cn", **overrides: Any) -> Instrument:
    currency = {"us": "USD", "cn": "CNY", "crypto": "USDT"}[market]
    return Instrument(symbol=symbol, market=market, currency=currency, **overrides)


@pytest.mark.parametrize(
    ("instrument", "rules", "pct"),
    [
        pytest.param(_instrument("600519.SH"), CN, D("0.10"), id="main-60-10pct"),
        pytest.param(_instrument("000001.SZ"), CN, D("0.10"), id="main-00-10pct"),
        pytest.param(_instrument("300750.SZ"), CN, D("0.20"), id="chinext-20pct"),
        pytest.param(_instrument("688981.SH"), CN, D("0.20"), id="star-20pct"),
        pytest.param(_instrument("830799.BJ"), CN, D("0.30"), id="beijing-30pct"),
        pytest.param(_instrument("600001.SH", is_st=True), CN, D("0.05"), id="st-main-5pct"),
        pytest.param(_instrument("300001.SZ", is_st=True), CN, D("0.20"), id="st-chinext-20pct"),
        pytest.param(_instrument("AAPL", "us"), US, None, id="us-unlimited"),
        pytest.param(_instrument("BTC/USDT", "crypto"), CRYPTO, None, id="crypto-unlimited"),
    ],
)
def test_price_limit_pct(instrument: Instrument, rules: MarketRules, pct: Decimal | None) -> None:
    assert price_limit_pct(instrument, rules) == pct


@pytest.mark.parametrize(
    ("prev_close", "pct", "down", "up"),
    [
        pytest.param(D("10.00"), D("0.10"), D("9.00"), D("11.00"), id="main-round"),
        pytest.param(D("10.05"), D("0.10"), D("9.05"), D("11.06"), id="main-half-up-both"),
        pytest.param(D("1650.00"), D("0.10"), D("1485.00"), D("1815.00"), id="moutai"),
        pytest.param(D("10.00"), D("0.20"), D("8.00"), D("12.00"), id="chinext-star"),
        pytest.param(D("10.00"), D("0.30"), D("7.00"), D("13.00"), id="beijing"),
        pytest.param(D("3.33"), D("0.05"), D("3.16"), D("3.50"), id="st-half-up"),
        pytest.param(D("2.35"), D("0.05"), D("2.23"), D("2.47"), id="st-down-rounds-half-up"),
    ],
)
def test_limit_prices(prev_close: Decimal, pct: Decimal, down: Decimal, up: Decimal) -> None:
    assert limit_prices(prev_close, pct, D("0.01")) == (down, up)


@pytest.mark.parametrize(
    ("price", "tick", "rounding", "expected"),
    [
        pytest.param(D("10.005"), D("0.01"), ROUND_CEILING, D("10.01"), id="ceiling"),
        pytest.param(D("10.005"), D("0.01"), ROUND_FLOOR, D("10.00"), id="floor"),
        pytest.param(D("10.005"), D("0.01"), ROUND_HALF_UP, D("10.01"), id="half-up"),
        pytest.param(D("10.004"), D("0.05"), ROUND_HALF_UP, D("10.00"), id="coarse-tick"),
        pytest.param(D("10.03"), D("0.05"), ROUND_CEILING, D("10.05"), id="coarse-ceiling"),
    ],
)
def test_round_to_tick(price: Decimal, tick: Decimal, rounding: str, expected: Decimal) -> None:
    assert round_to_tick(price, tick, rounding) == expected


def test_instrument_overrides_market_defaults() -> None:
    pair = _instrument(
        "ETH/USDT",
        "crypto",
        quantity_step=D("0.0001"),
        min_notional=D(5),
        price_tick=D("0.01"),
    )
    plain = _instrument("BTC/USDT", "crypto")
    assert (
        quantity_step_for(pair, CRYPTO),
        min_notional_for(pair, CRYPTO),
        price_tick_for(pair, CRYPTO),
    ) == (D("0.0001"), D(5), D("0.01"))
    assert (
        quantity_step_for(plain, CRYPTO),
        min_notional_for(plain, CRYPTO),
        price_tick_for(plain, CRYPTO),
    ) == (D("0.00001"), D(10), D("0.00000001"))


def test_a_zero_min_notional_override_is_kept() -> None:
    assert min_notional_for(_instrument("BTC/USDT", "crypto", min_notional=D(0)), CRYPTO) == 0


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(
            lambda: FeeSchedule(commission_bps=D(-1)), "must not be negative", id="neg-fee"
        ),
        pytest.param(lambda: FeeSchedule(commission_min=D("NaN")), "finite", id="nan-fee"),
        pytest.param(
            lambda: PriceLimits(board_pct=((Board.MAIN, D("0.1")),), st_pct=D("0.05")),
            "missing for boards",
            id="limits-missing-board",
        ),
        pytest.param(
            lambda: MarketRules(**{**_fields(CN), "settlement_days": 2}),
            "settlement_days",
            id="t-plus-2",
        ),
        pytest.param(
            lambda: MarketRules(**{**_fields(CN), "currency": "EUR"}),
            "unknown currency",
            id="unknown-currency",
        ),
        pytest.param(
            lambda: MarketRules(**{**_fields(US), "price_tick": D(0)}),
            "must be positive",
            id="zero-tick",
        ),
    ],
)
def test_rules_are_validated(build: object, message: str) -> None:
    assert callable(build)
    with pytest.raises(ValueError, match=message):
        build()


def _fields(rules: MarketRules) -> dict[str, object]:
    return {name: getattr(rules, name) for name in rules.__dataclass_fields__}


@pytest.mark.parametrize("rules", [US, CN, CRYPTO], ids=["us", "cn", "crypto"])
def test_with_no_costs_given_the_rules_are_unchanged(rules: MarketRules) -> None:
    assert with_costs(rules) == rules


@pytest.mark.parametrize(
    ("rules", "costs", "fees", "slippage", "minimum"),
    [
        pytest.param(
            CN,
            {"commission_bps": D(5), "commission_min": D(0), "stamp_duty_sell_bps": D(10)},
            FeeSchedule(
                commission_bps=D(5),
                commission_min=D(0),
                stamp_duty_sell_bps=D(10),
                transfer_fee_bps=D("0.1"),
            ),
            D(5),
            D(0),
            id="cn-ktd-fin-fees-keep-the-transfer-fee",
        ),
        pytest.param(
            CRYPTO,
            {"commission_bps": D("7.5"), "min_notional": D(5), "slippage_bps": D(0)},
            FeeSchedule(commission_bps=D("7.5")),
            D(0),
            D(5),
            id="crypto-taker-fee-and-minimum",
        ),
        pytest.param(
            US,
            {"transfer_fee_bps": D("0.3")},
            FeeSchedule(transfer_fee_bps=D("0.3")),
            D(5),
            D(0),
            id="us-a-fee-of-its-own",
        ),
    ],
)
def test_with_costs_replaces_only_what_is_given(
    rules: MarketRules,
    costs: dict[str, Decimal],
    fees: FeeSchedule,
    slippage: Decimal,
    minimum: Decimal,
) -> None:
    found = with_costs(rules, **costs)
    assert (found.fees, found.slippage_bps, found.min_notional) == (fees, slippage, minimum)
    costs_fields = {"fees", "slippage_bps", "min_notional"}
    kept = {name: value for name, value in _fields(rules).items() if name not in costs_fields}
    assert {name: getattr(found, name) for name in kept} == kept


def test_with_costs_refuses_a_negative_cost() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        with_costs(US, slippage_bps=D(-1))


@pytest.mark.parametrize("rules", [US, CN, CRYPTO], ids=lambda rules: rules.market)
def test_the_rules_zone_is_the_calendar_s(rules: MarketRules) -> None:
    assert rules.timezone == calendar_for(rules.calendar_id).timezone
