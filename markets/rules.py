"""Market rules as data: one frozen `MarketRules` value per market (US, CN, crypto).

This module owns the numbers that make a market what it is (calendar, currency, lots and steps,
settlement, price limits by A-share board, fees, slippage, tick, benchmark, default universe,
shorting: borrow fee and margins), `with_costs`, which puts configured fees, slippage and minimum
order value in place of those defaults, `with_shorting`, which does the same for the shorting
numbers, and the small pure functions that read them: the effective step, lot, minimum notional
and tick of an instrument, the A-share board of a symbol, its daily price-limit percentage and
limit prices.
Execution (`execution.py`) applies these values; it holds no market numbers of its own.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal

from openbell.markets.domain import (
    Instrument,
    Side,
    check_currency,
    check_decimal,
    check_market,
    round_to_tick,
)

#: One basis point as a fraction.
BPS = Decimal("0.0001")


@dataclass(frozen=True, slots=True, kw_only=True)
class FeeSchedule:
    """Fees charged on a fill, in basis points of its notional.

    Commission applies to both sides with a per-fill minimum (in the market's currency); stamp duty
    applies to sells only; the transfer fee applies to both sides.
    """

    commission_bps: Decimal = Decimal(0)
    commission_min: Decimal = Decimal(0)
    stamp_duty_sell_bps: Decimal = Decimal(0)
    transfer_fee_bps: Decimal = Decimal(0)

    def __post_init__(self) -> None:
        for name in (
            "commission_bps",
            "commission_min",
            "stamp_duty_sell_bps",
            "transfer_fee_bps",
        ):
            check_decimal(name, getattr(self, name))


class Board(enum.StrEnum):
    """An A-share listing board, read from the 6-digit code."""

    MAIN = "main"
    CHINEXT = "chinext"
    STAR = "star"
    BEIJING = "beijing"


#: Code prefixes per board, longest first wins. Codes matching none (B-shares 900xxx/200xxx) are
#: treated as main board, which is also their limit (+-10%).
BOARD_PREFIXES: tuple[tuple[str, Board], ...] = (
    ("688", Board.STAR),
    ("689", Board.STAR),
    ("92", Board.BEIJING),
    ("30", Board.CHINEXT),
    ("60", Board.MAIN),
    ("00", Board.MAIN),
    ("8", Board.BEIJING),
    ("4", Board.BEIJING),
)

_CODE = re.compile(r"^(\d{6})(?:\.(SH|SZ|BJ))?$")


def a_share_code(symbol: str) -> str:
    """The 6-digit code of an A-share symbol ("600519.SH" or bare "600519")."""
    match = _CODE.match(symbol.upper())
    if match is None:
        raise ValueError(f"not an A-share symbol: {symbol!r}; expected '600519.SH' or '600519'")
    return match.group(1)


def board_of(symbol: str) -> Board:
    """The listing board of an A-share symbol, from its code prefix."""
    code = a_share_code(symbol)
    for prefix, board in BOARD_PREFIXES:
        if code.startswith(prefix):
            return board
    return Board.MAIN


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceLimits:
    """Daily price limits against the previous close, as a fraction per board.

    `st_pct` replaces the board's limit for a stock under special treatment on the boards listed in
    `st_boards` (the main boards; ST stocks on ChiNext, STAR and Beijing keep their board's limit).
    `buffer_pct` (KTD-Fin's engine buffer; 0 by default) moves the price at which execution
    refuses an order inside the official limit by that fraction of the previous close: with
    0.005, a main-board buy is refused from +9.5 % on, a ChiNext one from +19.5 % (see
    `markets.price_limits`). Fills never go beyond the official limits either way.
    """

    board_pct: tuple[tuple[Board, Decimal], ...]
    st_pct: Decimal
    st_boards: frozenset[Board] = frozenset({Board.MAIN})
    buffer_pct: Decimal = Decimal(0)

    def __post_init__(self) -> None:
        check_decimal("st_pct", self.st_pct, positive=True)
        for board, pct in self.board_pct:
            check_decimal(f"board_pct[{board}]", pct, positive=True)
        missing = set(Board) - {board for board, _ in self.board_pct}
        if missing:
            raise ValueError(f"price limits missing for boards {sorted(missing)}")
        check_decimal("buffer_pct", self.buffer_pct)
        narrowest = min(self.st_pct, *(pct for _, pct in self.board_pct))
        if self.buffer_pct >= narrowest:
            raise ValueError(
                f"buffer_pct {self.buffer_pct} must be below the narrowest limit {narrowest}"
            )

    def pct_for(self, board: Board, *, is_st: bool) -> Decimal:
        """The limit fraction for a stock on `board`."""
        if is_st and board in self.st_boards:
            return self.st_pct
        return dict(self.board_pct)[board]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShortRules:
    """How a market lets a retail account short, as plain values.

    `borrow_fee_bps_per_year` is the yearly borrow fee on a short's market value, accrued per
    calendar day (`fee = |q| x close x bps / 10000 / day_count`); `initial_margin` is the fraction
    of the short market value the account's equity must cover when a short is opened or
    increased; `maintenance_margin` the fraction below which the account is in a margin call.
    Valid when `0 < maintenance_margin <= initial_margin <= 1` and the fee is not negative.
    """

    borrow_fee_bps_per_year: Decimal
    initial_margin: Decimal
    maintenance_margin: Decimal
    day_count: int = 365

    def __post_init__(self) -> None:
        check_decimal("borrow_fee_bps_per_year", self.borrow_fee_bps_per_year)
        check_decimal("initial_margin", self.initial_margin, positive=True)
        check_decimal("maintenance_margin", self.maintenance_margin, positive=True)
        if not self.maintenance_margin <= self.initial_margin <= 1:
            raise ValueError(
                f"shorting margins must satisfy 0 < maintenance ({self.maintenance_margin}) "
                f"<= initial ({self.initial_margin}) <= 1"
            )
        if isinstance(self.day_count, bool) or self.day_count not in (360, 365, 366):
            raise ValueError(f"day_count must be 360, 365 or 366, got {self.day_count}")


@dataclass(frozen=True, slots=True, kw_only=True)
class MarketRules:
    """Everything that differs between markets, as plain values.

    Quantities: buys are whole multiples of `lot_size` and sells of `sell_lot_size` (None: the
    quantity step); with `odd_lot_sell_whole` an odd remainder of a holding may be sold in one
    order. `quantity_step`, `min_notional` and `price_tick` are defaults an `Instrument` may
    override. `settlement_days` is how many sessions after a buy its shares become sellable.
    `shorting` is None where retail accounts cannot short (A-shares, always).
    """

    market: str
    calendar_id: str
    timezone: str
    currency: str
    quantity_step: Decimal
    lot_size: Decimal | None
    sell_lot_size: Decimal | None
    odd_lot_sell_whole: bool
    min_notional: Decimal
    settlement_days: int
    price_limits: PriceLimits | None
    fees: FeeSchedule
    slippage_bps: Decimal
    price_tick: Decimal
    benchmark: str
    universe: str
    shorting: ShortRules | None = None

    def __post_init__(self) -> None:
        check_market(self.market)
        check_currency(self.currency)
        check_decimal("quantity_step", self.quantity_step, positive=True)
        for name in ("lot_size", "sell_lot_size"):
            value = getattr(self, name)
            if value is not None:
                check_decimal(name, value, positive=True)
        check_decimal("min_notional", self.min_notional)
        check_decimal("slippage_bps", self.slippage_bps)
        check_decimal("price_tick", self.price_tick, positive=True)
        if self.settlement_days not in (0, 1):
            raise ValueError(f"settlement_days must be 0 or 1, got {self.settlement_days}")
        if self.market == "cn" and self.shorting is not None:
            raise ValueError(A_SHARES_NO_SHORTING)


#: Why a cn account or rule can never short.
A_SHARES_NO_SHORTING = "A-shares cannot be shorted by retail accounts"

#: US equities: general-collateral borrow (easy to borrow) costs about 0.25-0.30 %/yr at US
#: brokers; Reg T (12 CFR 220.12) asks 50 % initial margin on a short sale and FINRA Rule 4210(c)
#: 30 % maintenance on a short stock position (priced at $5 or more).
US_SHORTING = ShortRules(
    borrow_fee_bps_per_year=Decimal(30),
    initial_margin=Decimal("0.5"),
    maintenance_margin=Decimal("0.3"),
)

#: Crypto: a margin account borrowing the base coin pays a floating rate near 10 %/yr on the
#: majors (Binance/OKX cross-margin borrow rates), with 2x leverage (50 % initial) and a 25 %
#: maintenance ratio; day count 365 (markets never close).
CRYPTO_SHORTING = ShortRules(
    borrow_fee_bps_per_year=Decimal(1000),
    initial_margin=Decimal("0.5"),
    maintenance_margin=Decimal("0.25"),
)


US = MarketRules(
    market="us",
    calendar_id="XNYS",
    timezone="America/New_York",
    currency="USD",
    quantity_step=Decimal(1),
    lot_size=Decimal(1),
    sell_lot_size=Decimal(1),
    odd_lot_sell_whole=False,
    min_notional=Decimal(0),
    settlement_days=0,
    price_limits=None,
    fees=FeeSchedule(),
    slippage_bps=Decimal(5),
    price_tick=Decimal("0.01"),
    benchmark="QQQ",
    universe="nasdaq100",
    shorting=US_SHORTING,
)

#: A-shares. Slippage is 5 bps, the same as the other markets: SSE-50 names are the most liquid
#: A-shares and the tick (0.01 CNY) already costs a few bps on a typical price.
CN = MarketRules(
    market="cn",
    calendar_id="XSHG",
    timezone="Asia/Shanghai",
    currency="CNY",
    quantity_step=Decimal(1),
    lot_size=Decimal(100),
    sell_lot_size=Decimal(100),
    odd_lot_sell_whole=True,
    min_notional=Decimal(0),
    settlement_days=1,
    price_limits=PriceLimits(
        board_pct=(
            (Board.MAIN, Decimal("0.10")),
            (Board.CHINEXT, Decimal("0.20")),
            (Board.STAR, Decimal("0.20")),
            (Board.BEIJING, Decimal("0.30")),
        ),
        st_pct=Decimal("0.05"),
    ),
    fees=FeeSchedule(
        commission_bps=Decimal("2.5"),
        commission_min=Decimal(5),
        stamp_duty_sell_bps=Decimal(5),
        transfer_fee_bps=Decimal("0.1"),
    ),
    slippage_bps=Decimal(5),
    price_tick=Decimal("0.01"),
    benchmark="000016.SH",
    universe="sse50",
)

CRYPTO = MarketRules(
    market="crypto",
    calendar_id="24/7",
    timezone="UTC",
    currency="USDT",
    quantity_step=Decimal("0.00001"),
    lot_size=None,
    sell_lot_size=None,
    odd_lot_sell_whole=False,
    min_notional=Decimal(10),
    settlement_days=0,
    price_limits=None,
    fees=FeeSchedule(commission_bps=Decimal(10)),
    slippage_bps=Decimal(5),
    price_tick=Decimal("0.00000001"),
    benchmark="CD5",
    universe="crypto10",
    shorting=CRYPTO_SHORTING,
)

_BY_MARKET: dict[str, MarketRules] = {rules.market: rules for rules in (US, CN, CRYPTO)}


def rules_for(market: str) -> MarketRules:
    """The default rules of `market` ("us", "cn" or "crypto")."""
    check_market(market)
    return _BY_MARKET[market]


def with_costs(
    rules: MarketRules,
    *,
    commission_bps: Decimal | None = None,
    commission_min: Decimal | None = None,
    stamp_duty_sell_bps: Decimal | None = None,
    transfer_fee_bps: Decimal | None = None,
    slippage_bps: Decimal | None = None,
    min_notional: Decimal | None = None,
) -> MarketRules:
    """`rules` with the given costs in place of its own; a cost left None keeps the rule's value.

    The result is validated like any `MarketRules` (a negative or non-finite cost raises).
    """

    def pick(given: Decimal | None, kept: Decimal) -> Decimal:
        return kept if given is None else given

    fees = rules.fees
    return replace(
        rules,
        fees=FeeSchedule(
            commission_bps=pick(commission_bps, fees.commission_bps),
            commission_min=pick(commission_min, fees.commission_min),
            stamp_duty_sell_bps=pick(stamp_duty_sell_bps, fees.stamp_duty_sell_bps),
            transfer_fee_bps=pick(transfer_fee_bps, fees.transfer_fee_bps),
        ),
        slippage_bps=pick(slippage_bps, rules.slippage_bps),
        min_notional=pick(min_notional, rules.min_notional),
    )


def with_shorting(
    rules: MarketRules,
    *,
    borrow_fee_bps_per_year: Decimal | None = None,
    initial_margin: Decimal | None = None,
    maintenance_margin: Decimal | None = None,
) -> MarketRules:
    """`rules` with the given shorting numbers in place of its own; a number left None keeps the
    rule's value. Refuses (ValueError) to set a number on a market without shorting (A-shares),
    and validates the result like any `ShortRules`."""
    given = (borrow_fee_bps_per_year, initial_margin, maintenance_margin)
    if all(value is None for value in given):
        return rules
    if rules.shorting is None:
        reason = A_SHARES_NO_SHORTING if rules.market == "cn" else "it has no shorting"
        raise ValueError(f"the {rules.market} market cannot be shorted: {reason}")
    kept = rules.shorting
    return replace(
        rules,
        shorting=replace(
            kept,
            borrow_fee_bps_per_year=(
                kept.borrow_fee_bps_per_year
                if borrow_fee_bps_per_year is None
                else borrow_fee_bps_per_year
            ),
            initial_margin=kept.initial_margin if initial_margin is None else initial_margin,
            maintenance_margin=(
                kept.maintenance_margin if maintenance_margin is None else maintenance_margin
            ),
        ),
    )


def quantity_step_for(instrument: Instrument, rules: MarketRules) -> Decimal:
    """The smallest quantity increment of `instrument`: its own step, else the market's."""
    return instrument.quantity_step if instrument.quantity_step is not None else rules.quantity_step


def lot_size_for(instrument: Instrument, rules: MarketRules, side: Side) -> Decimal | None:
    """The lot `side` orders of `instrument` come in: its own lot, else the market's buy lot (for
    buys and covers) or sell lot (for sells and shorts) (None: only the quantity step applies)."""
    if instrument.lot_size is not None:
        return instrument.lot_size
    return rules.lot_size if side.pays else rules.sell_lot_size


def min_notional_for(instrument: Instrument, rules: MarketRules) -> Decimal:
    """The smallest order value of `instrument`: its own minimum, else the market's."""
    return instrument.min_notional if instrument.min_notional is not None else rules.min_notional


def price_tick_for(instrument: Instrument, rules: MarketRules) -> Decimal:
    """The price increment of `instrument`: its own tick, else the market's."""
    return instrument.price_tick if instrument.price_tick is not None else rules.price_tick


def price_limit_pct(instrument: Instrument, rules: MarketRules) -> Decimal | None:
    """The daily price-limit fraction of `instrument` (0.10 for +-10%), None when unlimited."""
    if rules.price_limits is None:
        return None
    return rules.price_limits.pct_for(board_of(instrument.symbol), is_st=instrument.is_st)


def limit_prices(prev_close: Decimal, pct: Decimal, tick: Decimal) -> tuple[Decimal, Decimal]:
    """The (limit-down, limit-up) prices: `prev_close * (1 -+ pct)`, rounded half-up to `tick`.

    This is how SSE and SZSE publish them (e.g. a 10.05 close at 10% gives 9.05 and 11.06).
    """
    check_decimal("prev_close", prev_close, positive=True)
    check_decimal("pct", pct)
    check_decimal("tick", tick, positive=True)
    down = round_to_tick(prev_close * (1 - pct), tick, ROUND_HALF_UP)
    up = round_to_tick(prev_close * (1 + pct), tick, ROUND_HALF_UP)
    return down, up
