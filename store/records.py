"""Values the store hands back to its callers: cycle states, recorded orders, applied corporate
actions and NAV snapshots.

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
from typing import Final

from openbell.markets.corporate_actions import CorporateAction
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
class MissedSlot:
    """A slot an account never ran, to be recorded `missed` with `reason` (its cause)."""

    account_id: int
    slot_at: datetime
    reason: str

    def __post_init__(self) -> None:
        check_utc("slot_at", self.slot_at)
        if not self.reason:
            raise ValueError("a missed slot needs its cause")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedOrder:
    """An order as the ledger holds it, with its outcome.

    `created` is False when the idempotency key already existed: the call changed nothing and
    `outcome` is the one stored the first time. `seq`, `symbol`, `side`, `quantity`,
    `target_weight` and `placed_at` repeat the stored order row (the ledger always fills them in;
    they default to None only so older call sites keep working).
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
    placed_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AppliedAction:
    """A corporate action as applied to one account: a ledger entry, like a fill.

    `quantity_before` is what the account held before the ex-date's open; the entry added
    `quantity_delta` shares and `cash_delta` cash (the dividend, or `fraction` of a share paid at
    `price`), and took `cost_delta` off the position's cost. `created` is False when the action
    had been applied before: the call changed nothing.
    """

    entry_id: int
    account_id: int
    action: CorporateAction
    quantity_before: Decimal
    quantity_delta: Decimal
    cash_delta: Decimal
    fraction: Decimal
    price: Decimal | None
    cost_delta: Decimal
    applied_at: datetime
    created: bool

    def __post_init__(self) -> None:
        check_utc("applied_at", self.applied_at)


@dataclass(frozen=True, slots=True, kw_only=True)
class NavMark:
    """One holding valued in a NAV snapshot: `value = quantity * price` by the money rule
    (`markets.domain.round_money`)."""

    symbol: str
    quantity: Decimal
    price: Decimal
    value: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class NavSnapshot:
    """An account's net asset value at `at`: `nav = cash + positions_value`.

    `last_fill_id` and `last_action_id` are the newest fill and applied corporate action the
    snapshot includes (None before the first), so the verifier can recompute the cash and positions
    it saw.
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
    last_action_id: int | None = None

    def __post_init__(self) -> None:
        check_utc("at", self.at)


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceEntry:
    """One model message or tool call of a cycle, as stored in `trace` (secrets already redacted).

    `role` is `system`, `user`, `assistant`, `reasoning` (a model's reasoning, kept here and never
    sent back) or `tool` (a call with its `arguments` and `result`). `seq` is assigned by the
    ledger when the entry is added (None before). An `assistant` entry (one model exchange)
    carries the model's identity as its response reported it: `model` (the response's `model`),
    `fingerprint` (its `system_fingerprint`) and `revision` (the provider's revision headers),
    each None when the response had none; and the recorded exchange, `request_digest` (the sha256
    of the request body as sent) and `response` (the response body, whole).
    """

    cycle_id: int
    role: str
    at: datetime
    seq: int | None = None
    content: str | None = None
    tool: str | None = None
    arguments: str | None = None
    result: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    latency_ms: int | None = None
    model: str | None = None
    fingerprint: str | None = None
    revision: str | None = None
    request_digest: str | None = None
    response: str | None = None

    def __post_init__(self) -> None:
        check_utc("at", self.at)


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleUsage:
    """An LLM agent's usage in a cycle (or an increment of it): tokens, latency, cost, errors.

    `cost` is None when the model has no price configured. `usage_estimated` is True when some
    tokens were estimated because the provider reported no usage. `llm_attempts` counts every
    request sent to the model, `llm_failed_attempts` those that got no completion (retried or
    not); `llm_latency_ms` is the time all of them took.
    """

    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    usage_estimated: bool = False
    llm_latency_ms: int = 0
    cost: Decimal | None = None
    parse_failures: int = 0
    invalid_tool_calls: int = 0
    llm_attempts: int = 0
    llm_failed_attempts: int = 0

    def __add__(self, other: CycleUsage) -> CycleUsage:
        cost = (
            None
            if self.cost is None and other.cost is None
            else (self.cost or Decimal(0)) + (other.cost or Decimal(0))
        )
        return CycleUsage(
            tokens_in=self.tokens_in + other.tokens_in,
            tokens_out=self.tokens_out + other.tokens_out,
            tokens_cached=self.tokens_cached + other.tokens_cached,
            usage_estimated=self.usage_estimated or other.usage_estimated,
            llm_latency_ms=self.llm_latency_ms + other.llm_latency_ms,
            cost=cost,
            parse_failures=self.parse_failures + other.parse_failures,
            invalid_tool_calls=self.invalid_tool_calls + other.invalid_tool_calls,
            llm_attempts=self.llm_attempts + other.llm_attempts,
            llm_failed_attempts=self.llm_failed_attempts + other.llm_failed_attempts,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalAppend:
    """What one cycle adds to its journal at once: trace `entries` (all of cycle `cycle_id`) and a
    `usage` increment (None: none). Several are written in one transaction by
    `Ledger.append_journals`."""

    cycle_id: int
    entries: tuple[TraceEntry, ...] = ()
    usage: CycleUsage | None = None

    def __post_init__(self) -> None:
        if any(entry.cycle_id != self.cycle_id for entry in self.entries):
            raise ValueError(f"every entry must belong to cycle {self.cycle_id}")


#: The usage columns of `cycle`, in `CycleUsage`'s order (its fields have the same names).
USAGE_COLUMNS: Final = tuple(CycleUsage.__dataclass_fields__)
