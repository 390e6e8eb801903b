"""Values the store hands back to its callers: cycle states, recorded orders and NAV snapshots.

These are frozen, keyword-only dataclasses (and string enums), like the domain types in
`openbell.markets.domain`; table rows never leave `openbell.store`. The enum values are also
the strings stored in the database, so they are a contract.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from openbell.markets.domain import Fill, Rejection, Side, check_utc


class CycleStatus(enum.StrEnum):
    """The state of one decision cycle. `claimed` is the only non-terminal state."""

    CLAIMED = "claimed"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"
    MISSED = "missed"


class SnapshotKind(enum.StrEnum):
    """Why a NAV snapshot was written: at a decision slot, or at a session close."""

    SLOT = "slot"
    CLOSE = "close"


class OrderStatus(enum.StrEnum):
    """The outcome stored for an order: every order is filled or rejected when it is recorded."""

    FILLED = "filled"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleRecord:
    """A cycle as the ledger holds it: who holds its claim, until when, and its state."""

    cycle_id: int
    account_id: int
    slot_at: datetime
    status: CycleStatus
    claimed_by: str
    lease_until: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedOrder:
    """An order as the ledger holds it, with its outcome.

    `created` is False when the idempotency key already existed: the call changed nothing and
    `outcome` is the one stored the first time. `seq`, `symbol`, `side`, `quantity` and
    `target_weight` repeat the stored order row (the ledger always fills them in; they default to
    None only so older call sites keep working).
    """

    order_id: int
    idempotency_key: str
    outcome: Fill | Rejection
    created: bool
    fill_id: int | None = None
    seq: int | None = None
    symbol: str | None = None
    side: Side | None = None
    quantity: Decimal | None = None
    target_weight: Decimal | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NavMark:
    """One holding valued in a NAV snapshot: `value = quantity * price`, exactly."""

    symbol: str
    quantity: Decimal
    price: Decimal
    value: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class NavSnapshot:
    """An account's net asset value at `at`: `nav = cash + positions_value`.

    `last_fill_id` is the newest fill the snapshot includes (None before the first fill), so the
    verifier can recompute the cash and positions it saw.
    """

    snapshot_id: int
    account_id: int
    at: datetime
    kind: SnapshotKind
    cash: Decimal
    positions_value: Decimal
    nav: Decimal
    last_fill_id: int | None
    marks: Mapping[str, NavMark] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_utc("at", self.at)
