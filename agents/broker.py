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

Shorting (design §4): where the market's rules allow shorting, a `short` (or a `buy` while a
short is open) that fills is refused with `INSUFFICIENT_MARGIN` when the account after it would
have equity below its initial requirement (`markets.margin.margin_rejection`, at the slot's
quotes). `MarginCall` covers an account in a margin call before its agent's turn: the largest short
first, whole position, until the maintenance requirement holds at the slot's marks, each cover
recorded with its `margin_call` row as order -1, -2, ... of the cycle (the system's orders;
`CycleOrders` numbers only the agent's, from 1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import structlog

from openbell.agents.book import unwind
from openbell.markets.calendars import TradingCalendar
from openbell.markets.domain import (
    AccountState,
    Fill,
    Instrument,
    Order,
    Position,
    Quote,
    Rejection,
    RejectReason,
    Side,
)
from openbell.markets.execution import execute, sellable_quantity
from openbell.markets.gateway import MarketSnapshot
from openbell.markets.margin import (
    account_exposure,
    exposure,
    initial_margin_check,
    margin_call_reason,
    next_margin_cover,
)
from openbell.markets.rules import MarketRules, ShortRules
from openbell.store.ledger import Ledger
from openbell.store.records import NavSnapshot, RecordedOrder, TraceEntry

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

    def sellable(self, position: Position, now: datetime) -> Decimal:
        """How much of `position` may be sold at `now` under the market's settlement rule (T+1),
        as execution decides it (`markets.execution.sellable_quantity`)."""
        return sellable_quantity(
            position=position, now=now, rules=self._rules, calendar=self._calendar
        )

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
        outcome = self._execute(order, account_id, snapshot)
        return self._record(cycle_id, seq, order, outcome, target_weight)

    def _execute(self, order: Order, account_id: int, snapshot: MarketSnapshot) -> Fill | Rejection:
        """`order` executed against the account as the ledger holds it at its fill time, then
        checked against the initial margin where the market allows shorting."""
        quote = self._fill_price(order.instrument.symbol, order.placed_at)
        if quote is not None and quote.at - order.placed_at > self._max_fill_delay:
            quote = None
        fill_at = order.placed_at if quote is None else max(order.placed_at, quote.at)
        shorting = self._rules.shorting
        margin = None
        if shorting is not None:  # positions marked at the slot's quotes
            marks = {symbol: quote.price for symbol, quote in snapshot.quotes.items()}
            margin = initial_margin_check(marks, shorting)
        return execute(
            order=order,
            account=self._ledger.account_state(account_id, fill_at),
            price=None if quote is None else quote.price,
            now=fill_at,
            rules=self._rules,
            calendar=self._calendar,
            prev_close=snapshot.previous_closes.get(order.instrument.symbol),
            price_source=self._price_source,
            margin=margin,
        )

    def cover(
        self,
        *,
        cycle_id: int,
        seq: int,
        order: Order,
        snapshot: MarketSnapshot,
        account_id: int,
        equity: Decimal,
        requirement: Decimal,
    ) -> RecordedOrder:
        """Execute a margin call's cover `order` and record it as order `seq` (< 0) of `cycle_id`
        with its `margin_call` row (`Ledger.record_margin_cover`)."""
        outcome = self._execute(order, account_id, snapshot)
        recorded = self._ledger.record_margin_cover(
            cycle_id=cycle_id,
            seq=seq,
            order=order,
            outcome=outcome,
            equity=equity,
            requirement=requirement,
        )
        fields = {"cycle_id": cycle_id, "seq": seq, "symbol": order.instrument.symbol}
        if isinstance(recorded.outcome, Rejection):
            log.warning(
                "margin_call_cover_rejected", reason=recorded.outcome.reason.value, **fields
            )
        else:
            log.warning("margin_call_covered", quantity=str(recorded.outcome.quantity), **fields)
        return recorded

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
            if stored.seq > 0:  # negative: the system's orders (a margin call's covers)
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


def in_margin_call(snapshot: NavSnapshot, rules: ShortRules, currency: str) -> bool:
    """Whether the account was in a margin call at NAV `snapshot` (its cash and marks): shorts
    open and equity below the maintenance requirement."""
    if not any(mark.quantity < 0 for mark in snapshot.marks.values()):  # no short: no call
        return False
    valued = exposure(
        snapshot.cash,
        {symbol: mark.quantity for symbol, mark in snapshot.marks.items()},
        {symbol: mark.price for symbol, mark in snapshot.marks.items()},
        currency,
    )
    return valued.in_margin_call(rules)


@dataclass(frozen=True, slots=True, kw_only=True)
class MarginCall:
    """Covers the shorts of an account in a margin call at its next slot, before its agent's turn
    (design §4): the call is decided on the account's newest NAV snapshot at or before the slot;
    then, while equity is below the maintenance requirement at the slot's `marks`, the largest
    short is covered whole at the slot's execution price, as order -1, -2, ... of the cycle with
    reason `margin call: equity E below maintenance M` and its `margin_call` row. A cover refused
    (no price, say) ends the call for this slot; the next snapshot decides again. Run again on a
    cycle, it numbers new covers after those recorded, and places none once the call is met."""

    ledger: Ledger
    broker: PaperBroker
    rules: ShortRules
    account_id: int
    cycle_id: int
    now: datetime

    def due(self, currency: str) -> bool:
        """Whether the account's newest snapshot at or before `now` puts it in a margin call."""
        snapshot = self.ledger.latest_nav_snapshot(self.account_id, self.now)
        return snapshot is not None and in_margin_call(snapshot, self.rules, currency)

    def cover(
        self,
        snapshot: MarketSnapshot,
        marks: Mapping[str, Decimal],
        instrument: Callable[[str], Instrument],
    ) -> list[RecordedOrder]:
        """Cover shorts until the maintenance requirement holds at `marks` (every held symbol
        priced); the covers recorded."""
        stored = [
            order.seq
            for order in self.ledger.cycle_orders(self.cycle_id)
            if order.seq is not None and order.seq < 0
        ]
        seq = min(stored, default=0)
        placed: list[RecordedOrder] = []
        first_reason = ""
        while True:
            state = self.ledger.account_state(self.account_id, self.now)
            symbol = next_margin_cover(state, marks, self.rules)
            if symbol is None:
                break
            valued = account_exposure(state, marks)
            requirement = valued.maintenance_requirement(self.rules)
            reason = margin_call_reason(valued.equity, requirement, state.cash.currency)
            first_reason = first_reason or reason
            seq -= 1
            order = Order(
                instrument=instrument(symbol),
                side=Side.COVER,
                quantity=-state.quantity(symbol),
                placed_at=self.now,
                reason=reason,
            )
            recorded = self.broker.cover(
                cycle_id=self.cycle_id,
                seq=seq,
                order=order,
                snapshot=snapshot,
                account_id=self.account_id,
                equity=valued.equity,
                requirement=requirement,
            )
            placed.append(recorded)
            if isinstance(recorded.outcome, Rejection):
                break
        if placed:
            self.ledger.append_journal(
                self.cycle_id,
                [
                    TraceEntry(
                        cycle_id=self.cycle_id,
                        role="system",
                        at=self.now,
                        content=_told(first_reason, placed),
                    )
                ],
            )
        return placed


def _told(reason: str, placed: list[RecordedOrder]) -> str:
    """What the agent's trace says of a margin call's covers (`reason`: the first cover's)."""
    lines = []
    for recorded in placed:
        outcome = recorded.outcome
        if isinstance(outcome, Fill):
            lines.append(f"covered {outcome.quantity} {outcome.symbol} at {outcome.price}")
        else:
            lines.append(f"cover of {recorded.symbol} rejected: {outcome.message}")
    return f"{reason}: " + "; ".join(lines)
