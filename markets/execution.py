"""Pure paper execution: turn an order, an account and a price into a `Fill` or a `Rejection`.

This module owns how the market rules (`rules.py`) are applied to one order, and the quantity and
fee arithmetic other layers reuse (rounding to lots and steps, sellable quantity under T+1, fees,
the largest affordable buy). Nothing here reads the clock, touches storage or raises for a rule
violation: a refused order is a `Rejection` with a reason and one sentence the agent can act on.
The checks run in this order, the first failing one wins: market and currency, shorting allowed
(shorts and covers), market open, price, price limits (against the quote, before slippage),
holdings (nothing crosses zero: a sell within the long, a cover within the short, no buy on a
short, no short on a long), lot and step rounding, T+1 sellable quantity, minimum notional, cash
for notional plus fees (buys and covers), margin (shorts, and buys while a short is open: the
`margin` hook, see `MarginCheck`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

from openbell.markets.calendars import TradingCalendar
from openbell.markets.domain import (
    AccountState,
    Fill,
    Instrument,
    Order,
    Position,
    Rejection,
    RejectReason,
    Side,
    check_utc,
    round_money,
    round_quantity,
    round_to_tick,
)
from openbell.markets.margin import initial_margin_check
from openbell.markets.price_limits import LimitBand, limit_band, percent
from openbell.markets.rules import (
    A_SHARES_NO_SHORTING,
    BPS,
    MarketRules,
    lot_size_for,
    min_notional_for,
    price_tick_for,
    quantity_step_for,
)


class _Refused(Exception):
    """Internal: carries a rejection out of a check; never leaves this module."""

    def __init__(self, reason: RejectReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


#: The margin rule applied to an order that opens or increases risk (a short, or a buy while a
#: short is open): given the account before the order and the fill it would make, None when the
#: account still meets its margin requirement after it, else the sentence saying why not (the
#: order is refused as `INSUFFICIENT_MARGIN`). The caller binds the marks at the decision time;
#: `markets.margin.initial_margin_check` is the rule of design §4.
MarginCheck = Callable[[AccountState, Fill], str | None]


@dataclass(frozen=True, slots=True)
class _Priced:
    fill_price: Decimal
    quantity: Decimal
    notional: Decimal
    fees: Decimal


def execute(
    *,
    order: Order,
    account: AccountState,
    price: Decimal | None,
    now: datetime,
    rules: MarketRules,
    calendar: TradingCalendar,
    prev_close: Decimal | None = None,
    price_source: str = "quote",
    margin: MarginCheck | None = None,
) -> Fill | Rejection:
    """Fill `order` at `price` (the first trade price at or after its placement) or reject it.

    `prev_close` is the previous session's close, needed where the market has price limits.
    `margin` checks a short (and a buy while a short is open) against the account's margin
    requirement; None: `markets.margin.initial_margin_check` (the one rule) with `price` as the
    order symbol's mark and each other position marked at its average price (callers that know
    the marks, as the broker does, bind their own).
    Wiring mistakes (a naive `now`, an order placed after `now`, a calendar that is not the
    market's, a non-Decimal price) raise; everything an agent can cause returns a `Rejection`.
    """
    check_utc("now", now)
    if order.placed_at > now:
        raise ValueError(f"order placed at {order.placed_at} cannot fill earlier, at {now}")
    if calendar.calendar_id != rules.calendar_id:
        raise ValueError(
            f"calendar {calendar.calendar_id} is not the {rules.market} calendar "
            f"{rules.calendar_id}"
        )
    for name, value in (("price", price), ("prev_close", prev_close)):
        if value is not None and not isinstance(value, Decimal):
            raise TypeError(f"{name} must be a Decimal or None, got {type(value).__name__}")
    try:
        priced = _price_order(order, account, price, now, rules, calendar, prev_close)
    except _Refused as refused:
        return Rejection(reason=refused.reason, message=refused.message, at=now)
    fill = Fill(
        symbol=order.instrument.symbol,
        side=order.side,
        quantity=priced.quantity,
        price=priced.fill_price,
        notional=priced.notional,
        fees=priced.fees,
        currency=rules.currency,
        filled_at=now,
        price_source=price_source,
    )
    if _needs_margin(order.side, account) and rules.shorting is not None:
        if margin is None:
            # `price` is usable here: a fill was priced from it.
            marks = {order.instrument.symbol: price or priced.fill_price}
            margin = initial_margin_check(marks, rules.shorting)
        refusal = margin(account, fill)
        if refusal is not None:
            return Rejection(reason=RejectReason.INSUFFICIENT_MARGIN, message=refusal, at=now)
    return fill


def _needs_margin(side: Side, account: AccountState) -> bool:
    """A short always, a buy while the account has a short open: the orders that add risk the
    margin must cover (sells and covers only reduce it)."""
    if side is Side.SHORT:
        return True
    return side is Side.BUY and any(p.quantity < 0 for p in account.positions.values())


def _price_order(
    order: Order,
    account: AccountState,
    price: Decimal | None,
    now: datetime,
    rules: MarketRules,
    calendar: TradingCalendar,
    prev_close: Decimal | None,
) -> _Priced:
    instrument = order.instrument
    _check_market(instrument, account, rules)
    _check_shorting(order, account, rules)
    if not calendar.is_open(now):
        raise _Refused(
            RejectReason.MARKET_CLOSED,
            f"The {rules.market} market ({rules.calendar_id}) is closed at {now.isoformat()}; "
            f"place the order during a trading session.",
        )
    if price is None or not _usable(price):
        raise _Refused(
            RejectReason.NO_PRICE,
            f"There is no usable price for {instrument.symbol} at {now.isoformat()}; "
            f"the order was not placed, try again at a later slot.",
        )
    fill_price = _fill_price(instrument, order.side, price, rules, prev_close)
    quantity = _quantity(order, account, now, rules, calendar)
    currency = rules.currency
    notional = round_money(quantity * fill_price, currency)
    minimum = min_notional_for(instrument, rules)
    if notional < minimum:
        raise _Refused(
            RejectReason.MIN_NOTIONAL,
            f"{quantity} {instrument.symbol} at {fill_price} is worth {notional} {currency}, "
            f"below the minimum order value of {minimum} {currency}; order a larger quantity.",
        )
    fees = fees_for(rules, order.side, notional, currency)
    if order.side.pays and account.cash.amount < notional + fees:
        affordable = affordable_quantity(
            instrument=instrument, price=fill_price, cash=account.cash.amount, rules=rules
        )
        doing = "Buying" if order.side is Side.BUY else "Covering"
        raise _Refused(
            RejectReason.INSUFFICIENT_CASH,
            f"{doing} {quantity} {instrument.symbol} at {fill_price} costs {notional + fees} "
            f"{currency} including {fees} fees, but the account has {account.cash.amount} "
            f"{currency}; at most {affordable} is affordable now.",
        )
    if order.side is Side.SHORT and fees >= notional:
        raise _Refused(
            RejectReason.MIN_NOTIONAL,
            f"Shorting {quantity} {instrument.symbol} at {fill_price} raises {notional} "
            f"{currency}, no more than its {fees} {currency} fees; short a larger quantity.",
        )
    return _Priced(fill_price=fill_price, quantity=quantity, notional=notional, fees=fees)


def _check_shorting(order: Order, account: AccountState, rules: MarketRules) -> None:
    """Refuse a short where the market (A-shares: never) or the account does not allow shorting,
    and a cover where the market has no shorting. A cover of an open short is always allowed,
    even after the account stopped allowing new shorts."""
    if order.side in (Side.SHORT, Side.COVER) and rules.shorting is None:
        why = A_SHARES_NO_SHORTING if rules.market == "cn" else "it has no shorting rules"
        raise _Refused(
            RejectReason.SHORTING_NOT_ALLOWED,
            f"The {rules.market} market cannot be shorted: {why}; buy and sell only.",
        )
    if order.side is Side.SHORT and not account.allow_short:
        raise _Refused(
            RejectReason.SHORTING_NOT_ALLOWED,
            "This account may not short (its agent has no allow_short); buy and sell only.",
        )


def _check_market(instrument: Instrument, account: AccountState, rules: MarketRules) -> None:
    if instrument.market != rules.market or instrument.currency != rules.currency:
        raise _Refused(
            RejectReason.WRONG_MARKET,
            f"{instrument.symbol} trades in the {instrument.market} market in "
            f"{instrument.currency}, but this account trades the {rules.market} market in "
            f"{rules.currency}; order only {rules.market} symbols.",
        )
    if account.market != rules.market or account.cash.currency != rules.currency:
        raise _Refused(
            RejectReason.WRONG_MARKET,
            f"This account holds {account.cash.currency} for the {account.market} market and "
            f"cannot trade the {rules.market} market; order only {account.market} symbols.",
        )


def _usable(price: Decimal) -> bool:
    # Checked for finiteness first: comparing a NaN Decimal raises InvalidOperation.
    return price.is_finite() and price > 0


def _fill_price(
    instrument: Instrument,
    side: Side,
    price: Decimal,
    rules: MarketRules,
    prev_close: Decimal | None,
) -> Decimal:
    """The quote moved against the trader by slippage, rounded to the tick against the trader,
    and kept within the day's price limits."""
    tick = price_tick_for(instrument, rules)
    band = _limit_band(instrument, side, price, rules, prev_close)
    moved = slipped_price(instrument=instrument, side=side, price=price, rules=rules)
    if band is not None:
        # Nothing trades outside the band, so slippage cannot push a fill past a limit price.
        moved = min(max(moved, band[0]), band[1])
    if moved <= 0:
        raise _Refused(
            RejectReason.NO_PRICE,
            f"The price {price} of {instrument.symbol} is below one tick ({tick}) after "
            f"slippage; it cannot be traded.",
        )
    return moved


def slipped_price(
    *, instrument: Instrument, side: Side, price: Decimal, rules: MarketRules
) -> Decimal:
    """`price` moved against the trader by the market's slippage and rounded to the tick against
    the trader (before price limits): what an order at quote `price` is expected to pay or get."""
    tick = price_tick_for(instrument, rules)
    if side.pays:
        return round_to_tick(price * (1 + rules.slippage_bps * BPS), tick, ROUND_CEILING)
    return round_to_tick(price * (1 - rules.slippage_bps * BPS), tick, ROUND_FLOOR)


def _limit_band(
    instrument: Instrument,
    side: Side,
    price: Decimal,
    rules: MarketRules,
    prev_close: Decimal | None,
) -> tuple[Decimal, Decimal] | None:
    """The official (limit-down, limit-up) prices when the market has limits; refuses an order
    the enforced band blocks (a buy or cover at or above its `up`, a sell or short at or below
    its `down`: `markets.price_limits.LimitBand`, the official limit less the rules' buffer)."""
    if rules.price_limits is None:
        return None
    if prev_close is None or not _usable(prev_close):
        raise _Refused(
            RejectReason.NO_PRICE,
            f"There is no previous close for {instrument.symbol}, so its daily price limit "
            f"cannot be checked; try again at a later slot.",
        )
    band = limit_band(instrument, rules, prev_close)
    if band is None:  # never: the market has limits
        return None
    if side.pays and price >= band.up:
        raise _Refused(RejectReason.LIMIT_UP, _limit_message(band, up=True))
    if not side.pays and price <= band.down:
        raise _Refused(RejectReason.LIMIT_DOWN, _limit_message(band, up=False))
    return band.official_down, band.official_up


def _limit_message(band: LimitBand, *, up: bool) -> str:
    """Why an order at the band's edge is refused (the official limit named beside a buffer)."""
    kind, price, official = (
        ("up", band.up, band.official_up) if up else ("down", band.down, band.official_down)
    )
    share = f"{'+' if up else '-'}{percent(band.pct)} of the previous close {band.prev_close}"
    if band.buffer_pct:
        at = (
            f"at or {'above' if up else 'below'} {price} ({share}, within "
            f"{percent(band.buffer_pct)} of its limit-{kind} price {official})"
        )
    else:
        at = f"at its limit-{kind} price {price} ({share})"
    if up:
        return f"{band.symbol} is {at}, so buy orders cannot fill; buy another symbol or wait."
    return f"{band.symbol} is {at}, so sell orders cannot fill; try again in a later session."


def _quantity(
    order: Order,
    account: AccountState,
    now: datetime,
    rules: MarketRules,
    calendar: TradingCalendar,
) -> Decimal:
    """The quantity that fills, after holdings, lots and steps, and T+1."""
    instrument = order.instrument
    held = account.quantity(instrument.symbol)
    _check_holding(order, held)
    quantity = tradable_quantity(
        instrument=instrument, side=order.side, quantity=order.quantity, held=held, rules=rules
    )
    if quantity <= 0:
        raise _Refused(RejectReason.LOT_SIZE, _lot_message(order, held, rules))
    if order.side is Side.SELL:
        # 0 < quantity <= held, so the account has a position in this symbol.
        position = account.positions[instrument.symbol]
        sellable = sellable_quantity(position=position, now=now, rules=rules, calendar=calendar)
        if quantity > sellable:
            raise _Refused(
                RejectReason.T_PLUS_1,
                f"Only {sellable} of the {held} {instrument.symbol} held can be sold now: shares "
                f"bought this session become sellable from the next session; sell at most "
                f"{sellable}.",
            )
    return quantity


def _check_holding(order: Order, held: Decimal) -> None:
    """Refuse an order that would cross zero: nothing moves a position from long to short or back
    in one order (sell or cover first)."""
    symbol = order.instrument.symbol
    side = order.side
    if side is Side.BUY and held < 0:
        raise _Refused(
            RejectReason.INSUFFICIENT_POSITION,
            f"Cannot buy {symbol}: the account is short {-held}; cover the short first.",
        )
    if side is Side.SHORT and held > 0:
        raise _Refused(
            RejectReason.INSUFFICIENT_POSITION,
            f"Cannot short {symbol}: the account holds {held}; sell the holding first.",
        )
    if side is Side.SELL and order.quantity > held:
        if held < 0:
            message = f"the account is short {-held}; cover to reduce a short"
        else:
            message = f"the account holds {held}; sell at most {held}"
        raise _Refused(
            RejectReason.INSUFFICIENT_POSITION,
            f"Cannot sell {order.quantity} {symbol}: {message}.",
        )
    if side is Side.COVER and order.quantity > -held:
        if held > 0:
            message = f"the account holds {held} and is not short; sell to reduce a holding"
        else:
            message = f"the account is short {max(-held, Decimal(0))}; cover at most that"
        raise _Refused(
            RejectReason.INSUFFICIENT_POSITION,
            f"Cannot cover {order.quantity} {symbol}: {message}.",
        )


def _lot_message(order: Order, held: Decimal, rules: MarketRules) -> str:
    instrument = order.instrument
    step = quantity_step_for(instrument, rules)
    lot = lot_size_for(instrument, rules, order.side) or step
    text = (
        f"{order.side.value.capitalize()} orders for {instrument.symbol} must be whole multiples "
        f"of {lot}; {order.quantity} rounds down to 0"
    )
    if order.side is Side.SELL and rules.odd_lot_sell_whole and held % lot:
        return f"{text}; order at least {lot}, or exactly the odd remainder {held % lot}."
    return f"{text}, so order at least {lot}."


def tradable_quantity(
    *,
    instrument: Instrument,
    side: Side,
    quantity: Decimal,
    held: Decimal,
    rules: MarketRules,
) -> Decimal:
    """The largest quantity not above `quantity` the lot and step rules allow (possibly 0).

    Sells are capped at `held`, covers at the short `-held`. Where `rules.odd_lot_sell_whole`
    (A-shares), a sell may include the holding's odd remainder (`held % lot`) in one order:
    holding 150, selling 150 or 50 is allowed, 120 rounds down to 100. Settlement (T+1) is not
    considered here.
    """
    if side is Side.SELL:
        quantity = min(quantity, held)
    elif side is Side.COVER:
        quantity = min(quantity, -held)
    quantity = round_quantity(quantity, quantity_step_for(instrument, rules))
    lot = lot_size_for(instrument, rules, side)
    if lot is None or quantity <= 0:
        return max(quantity, Decimal(0))
    if side is Side.SELL and rules.odd_lot_sell_whole:
        odd = held % lot
        if odd and quantity >= odd and (quantity - odd) % lot == 0:
            return quantity
    return round_quantity(quantity, lot)


def sellable_quantity(
    *, position: Position, now: datetime, rules: MarketRules, calendar: TradingCalendar
) -> Decimal:
    """How much of `position` may be sold at `now` under the market's settlement rule.

    With T+1, a lot bought in session S is sellable from `calendar.next_session(S)`: it is locked
    while `now` is still in session S (or earlier), so weekends and holidays need no special case.
    """
    if rules.settlement_days == 0 or not position.recent_buys:
        return position.quantity
    now_session = calendar.session_at_or_before(now)
    locked = sum(
        (
            lot.quantity
            for lot in position.recent_buys
            if calendar.session_at_or_before(lot.acquired_at) >= now_session
        ),
        Decimal(0),
    )
    return max(position.quantity - locked, Decimal(0))


def fees_for(rules: MarketRules, side: Side, notional: Decimal, currency: str) -> Decimal:
    """The fees of a fill worth `notional`: commission (at least its minimum), stamp duty on
    sells and shorts (a short sale is a sale), transfer fee; each rounded by the money rule
    (`round_money`), as brokers bill them."""
    schedule = rules.fees
    commission = round_money(
        max(notional * schedule.commission_bps * BPS, schedule.commission_min), currency
    )
    stamp = Decimal(0)
    if not side.pays:
        stamp = round_money(notional * schedule.stamp_duty_sell_bps * BPS, currency)
    transfer = round_money(notional * schedule.transfer_fee_bps * BPS, currency)
    return commission + stamp + transfer


def affordable_quantity(
    *, instrument: Instrument, price: Decimal, cash: Decimal, rules: MarketRules
) -> Decimal:
    """The largest buy quantity whose notional plus fees fits in `cash` at `price` (possibly 0)."""
    if price <= 0 or cash <= 0:
        return Decimal(0)
    step = quantity_step_for(instrument, rules)
    lot = lot_size_for(instrument, rules, Side.BUY) or step
    fee_bps = rules.fees.commission_bps + rules.fees.transfer_fee_bps
    quantity = tradable_quantity(
        instrument=instrument,
        side=Side.BUY,
        quantity=cash / (price * (1 + fee_bps * BPS)),
        held=Decimal(0),
        rules=rules,
    )

    def cost(amount: Decimal) -> Decimal:
        notional = round_money(amount * price, rules.currency)
        return notional + fees_for(rules, Side.BUY, notional, rules.currency)

    # The estimate ignores rounding and the commission minimum; step down until it fits.
    while quantity > 0 and cost(quantity) > cash:
        quantity -= lot
    return max(quantity, Decimal(0))
