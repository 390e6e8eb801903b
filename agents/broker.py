"""The paper broker: one order in, one recorded outcome out (DESIGN §3 step 4, §4), and the orders
of one cycle as a run places them, replayed when the cycle is run again.

This module owns the step from an agent's `Order` to a ledger row. `PaperBroker` looks up the
order's fill price (the first trade price at or after its placement, from an injected `FillPrice`:
in replay `ReplaySource.first_price_at_or_after`), applies the market rules through the pure
`markets.execution.execute` against the account as the ledger holds it, and records the fill or
rejection under the idempotency key `"{cycle_id}:{seq}"`; a key already stored returns its stored
outcome and changes nothing. Orders the rules never see (a symbol outside the universe) are
recorded as rejections through `reject`.

`CycleOrders` numbers a cycle's orders 1, 2, ... and makes an interrupted cycle replay
identically, so a cycle run again never fills twice. The daemon may run a cycle again after it
was cut off with some orders recorded; the agent then starts over and re-places its orders. The
cycle's recorded orders are read once, at construction (`Ledger.cycle_orders`, the one read of a
cycle's orders): an order whose `seq` is among them is answered with its stored outcome without
being executed again, and `state` shows the account as it was at the start of the cycle plus the
orders re-placed so far (the ledger's state with the fills of the stored orders not yet re-placed
taken back out), so a deterministic agent sizes every order as it did the first time. A re-placed
order whose symbol or side differs from the stored one marks the replay as diverged: no further
order is accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal

import structlog

from openbell.agents.book import unwind
from openbell.markets.calendars import TradingCalendar
from openbell.markets.domain import (
    AccountState,
    Fill,
    Order,
    Quote,
    Rejection,
    RejectReason,
)
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
        key is already recorded (`CycleOrders` answers a replayed order before it gets here). The
        previous close for price limits comes from `snapshot`. `account_id` saves a lookup of the
        cycle's account when the caller knows it."""
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


class CycleOrders:
    """Sequence, replay check and account view of the orders of one (account, cycle)."""

    def __init__(
        self,
        *,
        ledger: Ledger,
        broker: PaperBroker,
        account_id: int,
        cycle_id: int,
        now: datetime,
    ) -> None:
        self._ledger = ledger
        self._broker = broker
        self._account_id = account_id
        self._cycle_id = cycle_id
        self._now = now
        self._stored: dict[int, RecordedOrder] = {}
        for stored in ledger.cycle_orders(cycle_id):
            if stored.seq is None:
                raise ValueError(f"order {stored.order_id} of cycle {cycle_id} has no seq")
            self._stored[stored.seq] = stored
        self.seq = 0
        self.diverged = False
        self.placed: list[RecordedOrder] = []
        self._state: tuple[int, AccountState] | None = None

    @property
    def stored_count(self) -> int:
        """How many orders of this cycle were recorded before this run began."""
        return len(self._stored)

    def state(self) -> AccountState:
        """The account at the start of the cycle plus the orders placed so far in this run.

        Read from the ledger once per `seq` and cached: every accepted order (fill or rejection)
        moves `seq`, and the cycle holds the slot's claim on the account, so nothing else writes
        it while `seq` is unchanged.
        """
        if self._state is not None and self._state[0] == self.seq:
            return self._state[1]
        state = self._ledger.account_state(self._account_id, self._now)
        pending = [
            stored.outcome
            for seq, stored in self._stored.items()
            if seq > self.seq and isinstance(stored.outcome, Fill)
        ]
        if pending:
            state = unwind(state, pending)
        self._state = (self.seq, state)
        return state

    def place(
        self, order: Order, *, snapshot: MarketSnapshot, target_weight: Decimal | None
    ) -> RecordedOrder | None:
        """Place `order` as the next order of the cycle; None when the replay diverged."""
        return self._next(
            order,
            lambda seq: self._broker.place(
                cycle_id=self._cycle_id,
                seq=seq,
                order=order,
                snapshot=snapshot,
                target_weight=target_weight,
                account_id=self._account_id,
            ),
        )

    def reject(
        self, order: Order, *, reason: RejectReason, message: str, target_weight: Decimal | None
    ) -> RecordedOrder | None:
        """Record `order` as the next order of the cycle, rejected for `reason` before it reached
        execution; None when the replay diverged."""
        return self._next(
            order,
            lambda seq: self._broker.reject(
                cycle_id=self._cycle_id,
                seq=seq,
                order=order,
                reason=reason,
                message=message,
                target_weight=target_weight,
            ),
        )

    def _next(self, order: Order, record: Callable[[int], RecordedOrder]) -> RecordedOrder | None:
        """`order` as the next order: its stored outcome when the cycle recorded it before this
        run began, else what `record` makes of it under its `seq`."""
        if self.diverged:
            return None
        seq = self.seq + 1
        recorded = self._stored.get(seq)
        if recorded is None:
            recorded = record(seq)
        else:
            log.info("order_replayed", cycle_id=self._cycle_id, seq=seq, symbol=recorded.symbol)
        return self._accept(order, recorded)

    def _accept(self, order: Order, recorded: RecordedOrder) -> RecordedOrder | None:
        seq = self.seq + 1
        if (recorded.symbol, recorded.side) != (order.instrument.symbol, order.side):
            self.diverged = True
            log.error(
                "cycle_replay_diverged",
                cycle_id=self._cycle_id,
                seq=seq,
                stored=f"{recorded.side} {recorded.symbol}",
                placed=f"{order.side} {order.instrument.symbol}",
            )
            return None
        if not recorded.created and recorded.quantity != order.quantity:
            log.warning(
                "cycle_replay_quantity_differs",
                cycle_id=self._cycle_id,
                seq=seq,
                stored=str(recorded.quantity),
                placed=str(order.quantity),
            )
        self.seq = seq
        self.placed.append(recorded)
        return recorded

    def check_complete(self) -> None:
        """Log when a run finishes before re-placing every order the cycle had recorded."""
        last = max(self._stored, default=0)
        if self.seq < last and not self.diverged:
            log.warning(
                "cycle_replay_incomplete", cycle_id=self._cycle_id, placed=self.seq, stored=last
            )
