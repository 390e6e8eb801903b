"""The orders of one cycle as a run places them, and the replay of a cycle run again.

This module owns `CycleOrders`: it numbers a cycle's orders 1, 2, ... and sends them to the
`PaperBroker`, and it makes an interrupted cycle replay identically. The daemon may run a cycle
again after it was cut off with some orders recorded; the agent then starts over and re-places its
orders under keys that are already stored, and the broker returns their stored outcomes. At
construction the cycle's recorded orders are loaded, and `state` shows the account as it was at
the start of the cycle plus the orders re-placed so far (the ledger's state with the fills of the
stored orders not yet re-placed taken back out), so a deterministic agent sizes every order as it
did the first time. A re-placed order whose symbol or side differs from the stored one marks the
replay as diverged: no further order is accepted.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import structlog

from openbell.agents.book import unwind
from openbell.agents.broker import PaperBroker
from openbell.markets.domain import AccountState, Fill, Order, RejectReason
from openbell.markets.gateway import MarketSnapshot
from openbell.store.ledger import Ledger
from openbell.store.records import RecordedOrder

log = structlog.stdlib.get_logger(__name__)


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
        if self.diverged:
            return None
        recorded = self._broker.place(
            cycle_id=self._cycle_id,
            seq=self.seq + 1,
            order=order,
            snapshot=snapshot,
            target_weight=target_weight,
            account_id=self._account_id,
        )
        return self._accept(order, recorded)

    def reject(
        self, order: Order, *, reason: RejectReason, message: str, target_weight: Decimal | None
    ) -> RecordedOrder | None:
        """Record `order` as the next order of the cycle, rejected for `reason` before it reached
        execution; None when the replay diverged."""
        if self.diverged:
            return None
        recorded = self._broker.reject(
            cycle_id=self._cycle_id,
            seq=self.seq + 1,
            order=order,
            reason=reason,
            message=message,
            target_weight=target_weight,
        )
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
