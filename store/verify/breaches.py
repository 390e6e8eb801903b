"""What `openbell ledger verify` reports: each broken invariant as a `Breach`, and the report.

This module owns the invariants' names (stable: tests and operators match on them), `Breach` (one
broken invariant of one account, with the amount expected and the amount found), `VerifyReport`
(what was checked and every breach) and `Collector`, which the checks add breaches to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

CASH_BALANCE = "cash_balance"
NEGATIVE_CASH = "negative_cash"
POSITION_QUANTITY = "position_quantity"
NEGATIVE_QUANTITY = "negative_quantity"
CROSSES_ZERO = "crosses_zero"
SHORT_NOT_ALLOWED = "short_not_allowed"
FILL_ORDER_LINK = "fill_order_link"
ORDER_CYCLE_LINK = "order_cycle_link"
ONE_FILL_PER_ORDER = "one_fill_per_order"
FILL_MATCHES_ORDER = "fill_matches_order"
FILL_NOTIONAL = "fill_notional"
FILL_CURRENCY = "fill_currency"
NAV_SNAPSHOT = "nav_snapshot"
ACTION_ENTITLEMENT = "action_entitlement"
ACTION_AMOUNT = "action_amount"
ACTION_CURRENCY = "action_currency"
BORROW_FEE = "borrow_fee"
MISSING_BORROW_FEE = "missing_borrow_fee"
MARGIN_CALL_COVER = "margin_call_cover"


@dataclass(frozen=True, slots=True, kw_only=True)
class Breach:
    """One broken invariant of one account, with the amount expected and the amount found."""

    account_id: int
    agent_name: str
    market: str
    invariant: str
    expected: Decimal | None
    actual: Decimal | None
    detail: str

    def line(self) -> str:
        """One human-readable line: account, invariant, amounts and detail."""
        return (
            f"account {self.account_id} ({self.agent_name}/{self.market}) {self.invariant}: "
            f"expected {self.expected}, actual {self.actual}: {self.detail}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyReport:
    """The result of a verification: counts of what was checked and every breach found.

    `since` is the instant of the mark an incremental verification started from (None: every
    row was checked); the counts are then of the rows written since, and `full_accounts` the
    accounts that were checked in full all the same (no usable mark, or a breach to confirm).
    """

    accounts: int
    fills: int
    snapshots: int
    breaches: list[Breach] = field(default_factory=list)
    actions: int = 0
    borrow_fees: int = 0
    margin_calls: int = 0
    since: datetime | None = None
    full_accounts: int = 0

    @property
    def ok(self) -> bool:
        """True when no invariant is broken."""
        return not self.breaches

    def summary(self) -> str:
        """One line, e.g. `ledger ok: 3 accounts, 1000 fills, 12 snapshots` (and `, N corporate
        actions` when there are any; `since the mark of ...` for an incremental one)."""
        counts = f"{self.accounts} accounts, {self.fills} fills, {self.snapshots} snapshots"
        if self.actions:
            counts += f", {self.actions} corporate actions"
        if self.borrow_fees:
            counts += f", {self.borrow_fees} borrow fees"
        if self.margin_calls:
            counts += f", {self.margin_calls} margin calls"
        if self.since is not None:
            counts += f" written since the mark of {self.since.isoformat()}"
            if self.full_accounts:
                counts += f" ({self.full_accounts} accounts checked in full)"
        if self.ok:
            return f"ledger ok: {counts}"
        broken = len({breach.account_id for breach in self.breaches})
        return f"ledger BREACHED: {len(self.breaches)} breaches in {broken} accounts ({counts})"

    def lines(self) -> list[str]:
        """One line per breach."""
        return [breach.line() for breach in self.breaches]

    def broken_accounts(self) -> dict[int, list[str]]:
        """Each account with a breach, with its breaches' lines."""
        broken: dict[int, list[str]] = {}
        for breach in self.breaches:
            broken.setdefault(breach.account_id, []).append(breach.line())
        return broken


@dataclass(frozen=True, slots=True)
class Owner:
    """Whose breach it is: the account's agent and market, as a breach line names them."""

    agent_name: str
    market: str


class Collector:
    """Collects breaches, naming each account's agent and market."""

    def __init__(self, owners: Mapping[int, Owner]) -> None:
        self._owners = owners
        self.breaches: list[Breach] = []

    def add(
        self,
        account_id: int,
        invariant: str,
        expected: Decimal | None,
        actual: Decimal | None,
        detail: str,
    ) -> None:
        owner = self._owners.get(account_id, Owner("?", "?"))
        self.breaches.append(
            Breach(
                account_id=account_id,
                agent_name=owner.agent_name,
                market=owner.market,
                invariant=invariant,
                expected=expected,
                actual=actual,
                detail=detail,
            )
        )
