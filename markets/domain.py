"""Domain types of every layer: instruments, money, bars, quotes, news, orders, fills, positions.

Every value here is a frozen, keyword-only dataclass validated at construction. Amounts and
quantities are `Decimal` (never float), and every datetime is timezone-aware UTC. Vendor shapes are
turned into these types once, at their adapter; the store converts its rows to and from them.

This module also declares the one rounding rule of each kind of number; no other module rounds
money, quantities or prices by its own rule:

- **money** (a fill's notional, each fee, the cost of what is sold, a holding's value in a NAV,
  a dividend, cash in lieu): the currency's minor unit (`Currency.places`), ties rounded half-up
  (`round_money`), once, where the amount is computed from a product or a share. Sums and
  differences of rounded amounts (cash, NAV, positions value) are exact and never rounded again.
  Half-up because that is how brokers and exchanges bill each fee component, and one mode for every
  amount keeps the agent's book, the ledger and `ledger verify` equal to the minor unit.
- **quantities**: down to a whole multiple of the instrument's step or lot (`round_quantity`),
  never up past what is ordered or owned.
- **prices**: to a whole number of the instrument's ticks (`round_to_tick`), in the direction the
  market rule using it names (a fill after slippage against the trader; a limit price half-up).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal
from typing import Final

#: How a money amount is rounded to its currency's minor unit (see the module docstring).
MONEY_ROUNDING: Final = ROUND_HALF_UP


@dataclass(frozen=True, slots=True, kw_only=True)
class Currency:
    """A currency a ledger may hold, with the decimal places its amounts are kept to."""

    code: str
    places: int
    #: The smallest amount of the currency an account holds (0.01 for USD).
    minor_unit: Decimal = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "minor_unit", Decimal(1).scaleb(-self.places))

    def round(self, amount: Decimal) -> Decimal:
        """`amount` rounded to the minor unit by `MONEY_ROUNDING`."""
        return amount.quantize(self.minor_unit, rounding=MONEY_ROUNDING)


#: Currencies a ledger may hold, by code.
CURRENCIES: Final[dict[str, Currency]] = {
    currency.code: currency
    for currency in (
        Currency(code="USD", places=2),
        Currency(code="CNY", places=2),
        Currency(code="USDT", places=8),
    )
}

#: The number of decimal places each currency's amounts are kept to.
CURRENCY_PLACES: Final[dict[str, int]] = {code: c.places for code, c in CURRENCIES.items()}

#: The markets openbell trades.
MARKETS: frozenset[str] = frozenset({"us", "cn", "crypto"})


class Side(enum.StrEnum):
    """Direction of an order or fill. Nothing crosses zero implicitly:

    - `buy` opens or increases a long (only while the position is >= 0: a short is covered first);
    - `sell` reduces a long, never below zero;
    - `short` opens or increases a short (only while the position is <= 0, and only where the
      market and the account allow shorting); the position goes more negative;
    - `cover` reduces a short, never above zero.
    """

    BUY = "buy"
    SELL = "sell"
    SHORT = "short"
    COVER = "cover"

    @property
    def pays(self) -> bool:
        """True for the sides that pay cash (`buy`, `cover`); False for those that receive it."""
        return self in _PAYING_SIDES

    @property
    def sign(self) -> int:
        """How this side moves the position: +1 for `buy` and `cover`, -1 for `sell` and `short`."""
        return 1 if self in _PAYING_SIDES else -1


_PAYING_SIDES: Final = frozenset({Side.BUY, Side.COVER})


def check_utc(name: str, value: datetime) -> None:
    """Refuse a naive datetime, or one whose offset is not zero."""
    if value.tzinfo is UTC:  # the common case, decided without asking for the offset
        return
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware UTC, got naive {value.isoformat()}")
    if value.utcoffset() != timedelta(0):
        raise ValueError(f"{name} must be UTC, got offset {value.utcoffset()}")


def to_utc(value: datetime) -> datetime:
    """Convert an aware datetime to UTC; a naive one is refused."""
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value.isoformat()}: pass an aware one")
    return value.astimezone(UTC)


def check_decimal(name: str, value: Decimal, *, positive: bool = False) -> None:
    """Refuse a non-Decimal, a non-finite Decimal, or a negative (or non-positive) one."""
    if not isinstance(value, Decimal):
        raise TypeError(f"{name} must be a Decimal, got {type(value).__name__}")
    if not value.is_finite():
        raise ValueError(f"{name} must be finite, got {value}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")


def currency_of(code: str) -> Currency:
    """The currency `code` names; `ValueError` for one the ledger does not know."""
    found = CURRENCIES.get(code)
    if found is None:
        raise ValueError(f"unknown currency {code!r}; known: {sorted(CURRENCY_PLACES)}")
    return found


def check_currency(currency: str) -> None:
    """Refuse a currency the ledger does not know."""
    currency_of(currency)


def round_money(amount: Decimal, currency: str) -> Decimal:
    """`amount` rounded to the minor unit of `currency`, ties half-up: the money rule."""
    return amount.quantize(currency_of(currency).minor_unit, rounding=MONEY_ROUNDING)


def round_quantity(quantity: Decimal, step: Decimal) -> Decimal:
    """`quantity` rounded down to a whole multiple of `step`: the quantity rule."""
    return (quantity / step).to_integral_value(rounding=ROUND_DOWN) * step


def round_to_tick(price: Decimal, tick: Decimal, rounding: str) -> Decimal:
    """`price` rounded to a whole number of `tick`s with the given `decimal` rounding mode: the
    price rule (its direction is the market rule's: see the module docstring)."""
    return (price / tick).quantize(Decimal(1), rounding=rounding) * tick


def check_market(market: str) -> None:
    """Refuse a market openbell does not trade."""
    if market not in MARKETS:
        raise ValueError(f"unknown market {market!r}; known: {sorted(MARKETS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Money:
    """An exact amount in one currency. Arithmetic across currencies raises."""

    amount: Decimal
    currency: str

    def __post_init__(self) -> None:
        check_currency(self.currency)
        if not isinstance(self.amount, Decimal) or not self.amount.is_finite():
            raise ValueError(f"Money amount must be a finite Decimal, got {self.amount!r}")

    def _same(self, other: Money) -> None:
        if other.currency != self.currency:
            raise ValueError(f"currency mismatch: {self.currency} and {other.currency}")

    def __add__(self, other: Money) -> Money:
        self._same(other)
        return Money(amount=self.amount + other.amount, currency=self.currency)

    def __sub__(self, other: Money) -> Money:
        self._same(other)
        return Money(amount=self.amount - other.amount, currency=self.currency)

    def __str__(self) -> str:
        return f"{self.amount} {self.currency}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Instrument:
    """A tradable symbol in one market, with the facts its rules need.

    `quantity_step` and `min_notional` override the market's defaults (crypto pairs take them
    from the exchange); `lot_size` replaces the market's buy and sell lots (a synthetic index fund
    traded in fractional units); `is_st` marks an A-share under special treatment (tighter price
    limits).
    """

    symbol: str
    market: str
    currency: str
    name: str = ""
    is_st: bool = False
    quantity_step: Decimal | None = None
    min_notional: Decimal | None = None
    price_tick: Decimal | None = None
    lot_size: Decimal | None = None

    def __post_init__(self) -> None:
        if not self.symbol or self.symbol != self.symbol.strip():
            raise ValueError(
                f"instrument symbol must be non-empty and trimmed, got {self.symbol!r}"
            )
        check_market(self.market)
        check_currency(self.currency)
        for name in ("quantity_step", "min_notional", "price_tick", "lot_size"):
            value = getattr(self, name)
            if value is not None:
                check_decimal(name, value, positive=name != "min_notional")


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """An OHLCV bar over `[start_at, end_at)`. It is observable only once `end_at <= now`."""

    symbol: str
    start_at: datetime
    end_at: datetime
    open: Decimal
    high: Decimal
    low: Decimal
    close: Decimal
    volume: Decimal

    def __post_init__(self) -> None:
        check_utc("start_at", self.start_at)
        check_utc("end_at", self.end_at)
        if self.end_at <= self.start_at:
            raise ValueError(f"bar {self.symbol} ends at {self.end_at} before it starts")
        for name in ("open", "high", "low", "close"):
            check_decimal(name, getattr(self, name), positive=True)
        check_decimal("volume", self.volume)
        if self.low > min(self.open, self.close) or self.high < max(self.open, self.close):
            raise ValueError(
                f"bar {self.symbol} at {self.start_at}: low/high do not bound open/close"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Quote:
    """The last trade price of a symbol known at `at`."""

    symbol: str
    price: Decimal
    at: datetime

    def __post_init__(self) -> None:
        check_decimal("price", self.price, positive=True)
        check_utc("at", self.at)


@dataclass(frozen=True, slots=True, kw_only=True)
class NewsItem:
    """A news item or filing, observable only once `published_at <= now`.

    `symbol` is the instrument it is about, None for market-wide news; `source` names the vendor
    or feed it came from.
    """

    symbol: str | None
    published_at: datetime
    title: str
    url: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        check_utc("published_at", self.published_at)
        if not self.title.strip():
            raise ValueError("news item title must not be empty")


@dataclass(frozen=True, slots=True, kw_only=True)
class Order:
    """An agent's request to trade `quantity` of `instrument`, placed at `placed_at`."""

    instrument: Instrument
    side: Side
    quantity: Decimal
    placed_at: datetime
    reason: str = ""
    confidence: Decimal | None = None

    def __post_init__(self) -> None:
        check_decimal("quantity", self.quantity, positive=True)
        check_utc("placed_at", self.placed_at)
        if self.confidence is not None:
            check_decimal("confidence", self.confidence)
            if self.confidence > 1:
                raise ValueError(f"confidence must be within [0, 1], got {self.confidence}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Fill:
    """An executed order: quantity at price, with the cash it moved and the fees it paid.

    `notional` is `quantity * price` by the money rule (`round_money`); a buy or a cover costs
    `notional + fees`, a sell or a short raises `notional - fees` (a short's proceeds are kept in
    cash). `quantity` is always positive; `signed_quantity` is how the fill moves the position.
    """

    symbol: str
    side: Side
    quantity: Decimal
    price: Decimal
    notional: Decimal
    fees: Decimal
    currency: str
    filled_at: datetime
    price_source: str

    def __post_init__(self) -> None:
        check_decimal("quantity", self.quantity, positive=True)
        check_decimal("price", self.price, positive=True)
        check_decimal("notional", self.notional)
        check_decimal("fees", self.fees)
        check_currency(self.currency)
        check_utc("filled_at", self.filled_at)

    @property
    def cash_delta(self) -> Decimal:
        """The change this fill makes to the account's cash."""
        if self.side.pays:
            return -(self.notional + self.fees)
        return self.notional - self.fees

    @property
    def signed_quantity(self) -> Decimal:
        """The change this fill makes to the position: + for buy and cover, - for sell and short."""
        return self.quantity * self.side.sign


class RejectReason(enum.StrEnum):
    """Why an order did not fill. A rejection is a normal outcome, shown to the agent and stored."""

    INSUFFICIENT_CASH = "insufficient_cash"
    INSUFFICIENT_POSITION = "insufficient_position"
    LOT_SIZE = "lot_size"
    MIN_NOTIONAL = "min_notional"
    T_PLUS_1 = "t_plus_1"
    LIMIT_UP = "limit_up"
    LIMIT_DOWN = "limit_down"
    NOT_IN_UNIVERSE = "not_in_universe"
    MARKET_CLOSED = "market_closed"
    NO_PRICE = "no_price"
    WRONG_MARKET = "wrong_market"
    SHORTING_NOT_ALLOWED = "shorting_not_allowed"
    INSUFFICIENT_MARGIN = "insufficient_margin"


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejection:
    """An order the rules refused, with a machine-readable reason and a sentence for the agent."""

    reason: RejectReason
    message: str
    at: datetime

    def __post_init__(self) -> None:
        check_utc("at", self.at)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lot:
    """Shares acquired by one buy fill, kept while they may still be unsettled (T+1)."""

    quantity: Decimal
    acquired_at: datetime

    def __post_init__(self) -> None:
        check_decimal("quantity", self.quantity, positive=True)
        check_utc("acquired_at", self.acquired_at)


@dataclass(frozen=True, slots=True, kw_only=True)
class Position:
    """A holding in one symbol, long (`quantity` > 0) or short (`quantity` < 0).

    For a long, `cost` is the cash spent on what is still held (average cost). For a short, `cost`
    is the proceeds still open (average proceeds x |quantity|), also >= 0; its unrealised P&L is
    `cost - |quantity| x mark`. `recent_buys` lists the buy fills that may still be locked by
    settlement (longs only); the execution rules decide which of them are sellable at `now`.
    """

    symbol: str
    quantity: Decimal
    cost: Decimal = Decimal(0)
    recent_buys: tuple[Lot, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.quantity, Decimal) or not self.quantity.is_finite():
            raise ValueError(f"quantity must be a finite Decimal, got {self.quantity!r}")
        check_decimal("cost", self.cost)

    @property
    def is_short(self) -> bool:
        """True when the position is a short (negative quantity)."""
        return self.quantity < 0


def moved_position(quantity: Decimal, cost: Decimal, fill: Fill) -> tuple[Decimal, Decimal]:
    """The (quantity, cost) of a position of `quantity` and `cost` after `fill`: the one rule the
    ledger, the replay's working copy and the verifier move positions by.

    A buy adds its quantity and `notional + fees` to the cost of a long; a short adds its
    quantity (negative) and its `notional - fees` proceeds to the cost of a short. A sell or a
    cover takes its share of the cost by the money rule, all of it when it closes the position.
    Raises `ValueError` for a fill that would cross zero: a buy on a short, a short on a long, a
    sell of more than the long or a cover of more than the short.
    """
    side = fill.side
    if side is Side.BUY or side is Side.SHORT:
        if quantity * side.sign < 0:
            held = "short" if quantity < 0 else "long"
            first = "cover" if quantity < 0 else "sell"
            raise ValueError(
                f"{side.value} {fill.quantity} {fill.symbol} on a {held} position of {quantity}: "
                f"{first} it first"
            )
        added = fill.notional + fill.fees if side is Side.BUY else fill.notional - fill.fees
        return quantity + fill.signed_quantity, cost + added
    open_ = quantity if side is Side.SELL else -quantity
    if fill.quantity > open_:
        if side is Side.SELL:
            raise ValueError(f"selling {fill.quantity} {fill.symbol} but holding {quantity}")
        raise ValueError(
            f"covering {fill.quantity} {fill.symbol} but short {max(open_, Decimal(0))}"
        )
    if fill.quantity == open_:
        return Decimal(0), Decimal(0)
    closed = round_money(cost * fill.quantity / open_, fill.currency)
    return quantity + fill.signed_quantity, cost - closed


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountState:
    """What the execution rules need to know about an account: its cash, its positions (a short
    has a negative quantity) and whether it may short (`allow_short`, off by default; the market's
    rules must allow shorting too)."""

    market: str
    cash: Money
    positions: dict[str, Position] = field(default_factory=dict)
    allow_short: bool = False

    def __post_init__(self) -> None:
        check_market(self.market)

    def quantity(self, symbol: str) -> Decimal:
        """Shares or units held of `symbol`, negative for a short (zero when none)."""
        position = self.positions.get(symbol)
        return position.quantity if position is not None else Decimal(0)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    """A UTC datetime, for data files and tests."""
    return datetime(year, month, day, hour, minute, tzinfo=UTC)
