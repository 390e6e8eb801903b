"""The paper broker: one order in, one recorded outcome out (DESIGN §3 step 4, §4).

This module owns the step from an agent's `Order` to a ledger row: it looks up the order's fill
price (the first trade price at or after its placement, from an injected `FillPrice`: in replay
`ReplaySource.first_price_at_or_after`), applies the market rules through the pure
`markets.execution.execute` against the account as the ledger holds it, and records the fill or
rejection under the idempotency key `"{cycle_id}:{seq}"`. A key already stored returns its stored
outcome and changes nothing, so an interrupted cycle that is run again never fills twice. Orders the
rules never see (a symbol outside the universe) are recorded as rejections through `reject`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal

import structlog

from openbell.markets.calendars import TradingCalendar
from openbell.markets.domain import Fill, Order, Quote, Rejection, RejectReason
from openbell.markets.execution import execute
from openbell.markets.gateway import MarketSnapshot
from openbell.markets.rules import MarketRules
from openbell.store.ledger import Ledger
from openbell.store.records import RecordedOrder

log = structlog.stdlib.get_logger(__name__)

#: The first trade price of a symbol at or after a time, stamped when it traded; None if none.
FillPrice = Callable[[str, datetime], Quote | None]

#: How long after an order's placement its first price may come. Later (a weekend, a suspension,
#: a symbol with only daily bars at an hourly slot) counts as no price: the order is rejected.
MAX_FILL_DELAY = timedelta(hours=1)


class PaperBroker:
    """Fills and records orders of one market's accounts under that market's rules."""

    def __init__(
        self,
        *,
        ledger: Ledger,
        rules: MarketRules,
        calendar: TradingCalendar,
        fill_price: FillPrice,
        max_fill_delay: timedelta = MAX_FILL_DELAY,
        price_source: str = "first_price",
    ) -> None:
        if calendar.calendar_id != rules.calendar_id:
            raise ValueError(
                f"calendar {calendar.calendar_id} is not the {rules.market} calendar "
                f"{rules.calendar_id}"
            )
        self._ledger = ledger
        self._rules = rules
        self._calendar = calendar
        self._fill_price = fill_price
        self._max_fill_delay = max_fill_delay
        self._price_source = price_source

    @property
    def rules(self) -> MarketRules:
        """The market rules this broker applies."""
        return self._rules

    def place(
        self,
        *,
        cycle_id: int,
        seq: int,
        order: Order,
        snapshot: MarketSnapshot,
        target_weight: Decimal | None = None,
        account_id: int | None = None,
    ) -> RecordedOrder:
        """Execute `order` and record it as order `seq` of `cycle_id`; the stored outcome if that
        key is already recorded. The previous close for price limits comes from `snapshot`.
        `account_id` saves a lookup of the cycle's account when the caller knows it."""
        stored = self._ledger.recorded_order(cycle_id, seq)
        if stored is not None:
            log.info("order_replayed", cycle_id=cycle_id, seq=seq, symbol=stored.symbol)
            return stored
        if account_id is None:
            account_id = self._ledger.cycle_account_id(cycle_id)
        quote = self._fill_price(order.instrument.symbol, order.placed_at)
        if quote is not None and quote.at - order.placed_at > self._max_fill_delay:
            quote = None
        fill_at = order.placed_at if quote is None else max(order.placed_at, quote.at)
        outcome = execute(
            order=order,
            account=self._ledger.account_state(account_id, fill_at),
            price=None if quote is None else quote.price,
            now=fill_at,
            rules=self._rules,
            calendar=self._calendar,
            prev_close=snapshot.previous_closes.get(order.instrument.symbol),
            price_source=self._price_source,
        )
        return self._record(cycle_id, seq, order, outcome, target_weight)

    def reject(
        self,
        *,
        cycle_id: int,
        seq: int,
        order: Order,
        reason: RejectReason,
        message: str,
        target_weight: Decimal | None = None,
    ) -> RecordedOrder:
        """Record `order` as order `seq` of `cycle_id`, rejected for `reason` before execution
        (e.g. `not_in_universe`); the stored outcome if that key is already recorded."""
        rejection = Rejection(reason=reason, message=message, at=order.placed_at)
        return self._record(cycle_id, seq, order, rejection, target_weight)

    def _record(
        self,
        cycle_id: int,
        seq: int,
        order: Order,
        outcome: Fill | Rejection,
        target_weight: Decimal | None,
    ) -> RecordedOrder:
        recorded = self._ledger.record_order(
            cycle_id=cycle_id, seq=seq, order=order, outcome=outcome, target_weight=target_weight
        )
        fields = {"cycle_id": cycle_id, "seq": seq, "symbol": order.instrument.symbol}
        if not recorded.created:
            log.info("order_replayed", **fields)
        elif isinstance(recorded.outcome, Rejection):
            log.info("order_rejected", reason=recorded.outcome.reason.value, **fields)
        else:
            log.info("order_filled", quantity=str(recorded.outcome.quantity), **fields)
        return recorded
