"""An account's cash and holdings recomputed from its entries, in the order they were made.

The entries are the fills (in id order) and the corporate actions and borrow fees, each right
after the fill it names (`after_fill_id`; actions first, then fees, each in id order). This module
owns that order (`entry_key`), the checks that walk it (no negative cash, no holding crossing
zero, shorts only where allowed), the comparison of the walk's end with the stored cash and
position rows, and each NAV snapshot's cash and holdings. A walk starts from a `Running` state:
nothing for a full verification, a checkpoint's for an incremental one. A snapshot's sums come
from cursors over the fills, actions and fees that move forward (and back, by subtracting) to
its `last_fill_id`, `last_action_id` and instant, so a ledger's snapshots cost one pass over its
entries instead of one replay each.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Generic, TypeVar

from openbell.markets.domain import Side, round_money
from openbell.markets.rules import rules_for
from openbell.store.verify.breaches import (
    CASH_BALANCE,
    CROSSES_ZERO,
    NAV_SNAPSHOT,
    NEGATIVE_CASH,
    POSITION_QUANTITY,
    SHORT_NOT_ALLOWED,
    Collector,
)
from openbell.store.verify.facts import Account, Action, Fee, Fill, Mark, Position, Snapshot

#: Where an entry stands in the order entries were made: (fill id, 0, 0) for a fill,
#: (after_fill_id, 1, id) for a corporate action and (after_fill_id, 2, id) for a borrow fee.
EntryKey = tuple[int, int, int]


@dataclass(slots=True)
class Running:
    """Cash and holdings (by symbol; zeros may stay) after some entries."""

    cash: Decimal
    held: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))

    def nonzero(self) -> dict[str, Decimal]:
        """The holdings that are not zero."""
        return {symbol: quantity for symbol, quantity in self.held.items() if quantity != 0}


def may_short(account: Account) -> bool:
    """Whether `account` may hold shorts: it allows them, in a market whose rules have shorting
    (A-shares never)."""
    return account.allow_short and rules_for(account.market).shorting is not None


def cash_delta(fill: Fill) -> Decimal:
    if Side(fill.side).pays:  # buy and cover pay, sell and short receive
        return -(fill.notional + fill.fees)
    return fill.notional - fill.fees


def quantity_delta(fill: Fill) -> Decimal:
    return fill.quantity * Side(fill.side).sign


def entry_key(row: Fill | Action | Fee) -> EntryKey:
    if isinstance(row, Fill):
        return (row.id, 0, 0)
    return (row.after_fill_id or 0, 1 if isinstance(row, Action) else 2, row.id)


def _entries(
    fills: Sequence[Fill], actions: Sequence[Action], fees: Sequence[Fee]
) -> Iterator[tuple[str, Decimal, Decimal, str, Side | None]]:
    """(symbol, cash delta, quantity delta, what, side: None for an action or a fee) of each
    entry, in the order they were made."""
    keyed: list[tuple[EntryKey, Fill | Action | Fee]] = [(entry_key(row), row) for row in fills]
    keyed.extend((entry_key(row), row) for row in actions)
    keyed.extend((entry_key(row), row) for row in fees)
    keyed.sort(key=lambda pair: pair[0])
    for _, row in keyed:
        if isinstance(row, Fill):
            side = Side(row.side)
            yield row.symbol, cash_delta(row), quantity_delta(row), f"fill {row.id}", side
        elif isinstance(row, Fee):
            yield row.symbol, -row.amount, Decimal(0), f"borrow fee {row.id}", None
        else:
            yield row.symbol, row.cash_delta, row.quantity_delta, f"corporate action {row.id}", None


def walk_entries(
    account: Account,
    start: Running,
    fills: Sequence[Fill],
    actions: Sequence[Action],
    fees: Sequence[Fee],
    out: Collector,
) -> Running:
    """Walk the entries from `start` and return where they end. Cash stays non-negative after
    each; no holding crosses zero (a buy or short only on its own side of zero, a sell within the
    long, a cover within the short, an action keeps the sign); a holding goes negative only in an
    account that may short, and only by a short fill."""
    shorting = may_short(account)
    running = Running(start.cash, defaultdict(Decimal, start.held))
    held = running.held
    cash_reported = False
    reported: set[str] = set()
    for symbol, cash_change, quantity_change, what, side in _entries(fills, actions, fees):
        running.cash += cash_change
        before = held[symbol]
        after = held[symbol] = before + quantity_change
        if running.cash < 0 and not cash_reported:
            cash_reported = True
            out.add(account.id, NEGATIVE_CASH, Decimal(0), running.cash, f"cash after {what}")
        if symbol in reported:
            continue
        if _crosses(side, before, after):
            reported.add(symbol)
            out.add(
                account.id,
                CROSSES_ZERO,
                before,
                after,
                f"{symbol} goes from {before} to {after} at {what}",
            )
        elif after < 0 and not shorting:
            reported.add(symbol)
            out.add(
                account.id,
                SHORT_NOT_ALLOWED,
                Decimal(0),
                after,
                f"{symbol} is short {after} after {what}, but the account may not short",
            )
    return running


def _crosses(side: Side | None, before: Decimal, after: Decimal) -> bool:
    """Whether an entry moving a holding from `before` to `after` crosses zero: a buy on a short,
    a sell below zero, a short on a long, a cover above zero, an action changing the sign."""
    if side is Side.BUY:
        return before < 0
    if side is Side.SELL:
        return after < 0
    if side is Side.SHORT:
        return before > 0
    if side is Side.COVER:
        return after > 0
    return before * after < 0


def check_balances(
    account: Account,
    end: Running,
    positions: Sequence[Position],
    counts: tuple[int, int, int],
    out: Collector,
) -> None:
    """The stored cash and position rows against the walk's `end`; `counts` are the account's
    fills, actions and fees, for the breach line."""
    fills, actions, fees = counts
    if account.cash != end.cash:
        paid = f" + dividends over {actions} corporate actions" if actions else ""
        if fees:
            paid += f" - {fees} borrow fees"
        out.add(
            account.id,
            CASH_BALANCE,
            end.cash,
            account.cash,
            f"initial {account.initial_cash} + sells - buys - fees over {fills} fills{paid} "
            f"is {end.cash}, stored cash is {account.cash} {account.currency}",
        )
    if account.cash < 0:
        out.add(account.id, NEGATIVE_CASH, Decimal(0), account.cash, "stored cash is negative")
    stored = {row.symbol: row.quantity for row in positions}
    expected_held = end.nonzero()
    for symbol in sorted(set(stored) | set(expected_held)):
        expected = expected_held.get(symbol, Decimal(0))
        actual = stored.get(symbol, Decimal(0))
        if expected != actual:
            out.add(
                account.id,
                POSITION_QUANTITY,
                expected,
                actual,
                f"{symbol}: sum of fills and splits is {expected}, position row holds {actual}",
            )
        if actual < 0 and not may_short(account):
            out.add(
                account.id,
                SHORT_NOT_ALLOWED,
                Decimal(0),
                actual,
                f"{symbol} position row is short, but the account may not short",
            )


_K = TypeVar("_K", int, datetime)


class _Cursor(Generic[_K]):
    """A prefix of keyed entries (sorted by key) summed into a `Running`: `move_to(limit)` takes
    in every entry with key <= limit and gives back every other, by adding and subtracting."""

    def __init__(self, entries: list[tuple[_K, str, Decimal, Decimal]], into: Running) -> None:
        self._entries: list[tuple[_K, str, Decimal, Decimal]] = entries
        self._into = into
        self.taken = 0

    def move_to(self, limit: _K | None) -> None:
        entries, into = self._entries, self._into
        while self.taken < len(entries) and limit is not None and entries[self.taken][0] <= limit:
            _, symbol, cash, quantity = entries[self.taken]
            into.cash += cash
            into.held[symbol] += quantity
            self.taken += 1
        while self.taken > 0 and (limit is None or entries[self.taken - 1][0] > limit):
            self.taken -= 1
            _, symbol, cash, quantity = entries[self.taken]
            into.cash -= cash
            into.held[symbol] -= quantity


def check_snapshots(
    account: Account,
    base: Running,
    base_fees: int,
    fills: Sequence[Fill],
    actions: Sequence[Action],
    fees: Sequence[Fee],
    snapshots: Sequence[Snapshot],
    marks: Mapping[int, list[Mark]],
    out: Collector,
) -> None:
    """Each snapshot's cash and marks against the entries it includes: `base` (the entries
    before these, `base_fees` of them borrow fees) plus the fills up to its `last_fill_id`, the
    actions up to its `last_action_id` and the fees charged by its instant."""
    running = Running(base.cash, defaultdict(Decimal, base.held))
    by_fill = _Cursor([(f.id, f.symbol, cash_delta(f), quantity_delta(f)) for f in fills], running)
    by_action = _Cursor(
        [(a.id, a.symbol, a.cash_delta, a.quantity_delta) for a in actions], running
    )
    by_charge = _Cursor(
        sorted(
            ((fee.charged_at, fee.symbol, -fee.amount, Decimal(0)) for fee in fees),
            key=lambda entry: entry[0],
        ),
        running,
    )
    found: dict[int, list[tuple[str, Decimal | None, Decimal | None, str]]] = {}
    # In the order of their fills (nearly always their id order): the cursors move forward.
    ordered = sorted(snapshots, key=lambda s: -1 if s.last_fill_id is None else s.last_fill_id)
    for snapshot in ordered:
        by_fill.move_to(snapshot.last_fill_id)
        by_action.move_to(snapshot.last_action_id)
        by_charge.move_to(snapshot.at)
        found[snapshot.id] = _snapshot_breaches(
            account,
            snapshot,
            running.cash,
            running.nonzero(),
            base_fees + by_charge.taken,
            marks.get(snapshot.id, []),
        )
    for snapshot in snapshots:
        for invariant, expected, actual, detail in found[snapshot.id]:
            out.add(account.id, invariant, expected, actual, detail)


def _snapshot_breaches(
    account: Account,
    snapshot: Snapshot,
    cash: Decimal,
    held: dict[str, Decimal],
    charged: int,
    marks: Sequence[Mark],
) -> list[tuple[str, Decimal | None, Decimal | None, str]]:
    breaches: list[tuple[str, Decimal | None, Decimal | None, str]] = []
    last, last_action = snapshot.last_fill_id, snapshot.last_action_id
    where = f"snapshot {snapshot.id} ({snapshot.kind} at {snapshot.at.isoformat()})"
    if snapshot.cash != cash:
        breaches.append(
            (
                NAV_SNAPSHOT,
                cash,
                snapshot.cash,
                (
                    f"{where}: cash from fills up to {last}, corporate actions up to "
                    f"{last_action} and {charged} borrow fees charged by then"
                ),
            )
        )
    by_symbol = {mark.symbol: mark for mark in marks}
    for symbol in sorted(set(held) | set(by_symbol)):
        mark = by_symbol.get(symbol)
        expected = held.get(symbol, Decimal(0))
        if mark is None:
            breaches.append((NAV_SNAPSHOT, expected, None, f"{where}: no mark for {symbol}"))
        elif mark.quantity != expected:
            breaches.append((NAV_SNAPSHOT, expected, mark.quantity, f"{where}: {symbol} quantity"))
        elif mark.value not in _mark_values(mark, account.currency):
            breaches.append(
                (
                    NAV_SNAPSHOT,
                    round_money(mark.quantity * mark.price, account.currency),
                    mark.value,
                    f"{where}: {symbol} value at {mark.price}, by the money rule",
                )
            )
    positions_value = sum((mark.value for mark in marks), Decimal(0))
    if snapshot.positions_value != positions_value:
        breaches.append(
            (
                NAV_SNAPSHOT,
                positions_value,
                snapshot.positions_value,
                f"{where}: positions value is the sum of its marks",
            )
        )
    if snapshot.nav != snapshot.cash + snapshot.positions_value:
        breaches.append(
            (
                NAV_SNAPSHOT,
                snapshot.cash + snapshot.positions_value,
                snapshot.nav,
                f"{where}: nav = cash + positions value",
            )
        )
    return breaches


def _mark_values(mark: Mark, currency: str) -> tuple[Decimal, Decimal]:
    """The values a snapshot may hold for `mark`: `quantity * price` by the money rule, or the
    exact product, which snapshots written before the rule held (they must still verify, or an
    upgraded daemon would pause every account that holds something)."""
    exact = mark.quantity * mark.price
    return round_money(exact, currency), exact
