"""Checking the ledger invariants of DESIGN §5; `openbell ledger verify` prints this report.

`verify_ledger` recomputes every account from its append-only fills and corporate-action entries
and compares, exactly (as `Decimal`), with what the ledger stores: the running cash balance
(initial + sells + shorts - buys - covers - fees + dividends and cash in lieu, which a short
pays), the position rows (the signed sum of the fills, buy and cover +, sell and short -, plus
the shares splits added, both ways), that no fill or action crosses zero (a long stays long, a
short short), that shorts exist only in accounts allowed to short in a market that has shorting,
the fills' links to their orders and cycles, one fill per order matching it, each fill's
notional, each corporate action's entitlement (the holding before its ex-date, recomputed from
the fills) and amounts (the dividend; the split's shares and cash), every NAV snapshot at its
marks, each borrow fee (on the short the fills leave at its day's end, its amount), that no fee is
missing (every calendar day an account ended short, ended by its latest NAV snapshot, has one per
short symbol), and each margin call's cover fill. Amounts are recomputed by the money rule of
`markets.domain` (`round_money`). Entries are replayed among the fills after the fill they name
(`after_fill_id`). It reads the whole ledger into memory, which is fine for paper-trading volumes
(millions of fills would want a per-account pass). A breach names the account, the invariant
and the expected and actual amounts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TypeVar

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from openbell.markets.corporate_actions import ActionKind, split_quantity
from openbell.markets.domain import Side, round_money
from openbell.markets.margin import MARGIN_CALL, borrow_fee_at
from openbell.markets.rules import rules_for
from openbell.store.margin_ledger import day_end, last_ended_day
from openbell.store.records import OrderStatus
from openbell.store.tables import (
    AccountRow,
    AgentRow,
    BorrowFeeRow,
    CorporateActionRow,
    CycleRow,
    FillRow,
    MarginCallRow,
    NavMarkRow,
    NavSnapshotRow,
    OrderRow,
    PositionRow,
)

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
    """The result of `verify_ledger`: counts of what was checked and every breach found."""

    accounts: int
    fills: int
    snapshots: int
    breaches: list[Breach] = field(default_factory=list)
    actions: int = 0
    borrow_fees: int = 0
    margin_calls: int = 0

    @property
    def ok(self) -> bool:
        """True when no invariant is broken."""
        return not self.breaches

    def summary(self) -> str:
        """One line, e.g. `ledger ok: 3 accounts, 1000 fills, 12 snapshots` (and `, N corporate
        actions` when there are any)."""
        counts = f"{self.accounts} accounts, {self.fills} fills, {self.snapshots} snapshots"
        if self.actions:
            counts += f", {self.actions} corporate actions"
        if self.borrow_fees:
            counts += f", {self.borrow_fees} borrow fees"
        if self.margin_calls:
            counts += f", {self.margin_calls} margin calls"
        if self.ok:
            return f"ledger ok: {counts}"
        broken = len({breach.account_id for breach in self.breaches})
        return f"ledger BREACHED: {len(self.breaches)} breaches in {broken} accounts ({counts})"

    def lines(self) -> list[str]:
        """One line per breach."""
        return [breach.line() for breach in self.breaches]


@dataclass(slots=True)
class _Ledger:
    """Every row the checks read, keyed by id or grouped by account (fills in id order)."""

    accounts: dict[int, AccountRow]
    agent_names: dict[int, str]
    cycles: dict[int, CycleRow]
    orders: dict[int, OrderRow]
    fills: dict[int, list[FillRow]]
    actions: dict[int, list[CorporateActionRow]]
    positions: dict[int, list[PositionRow]]
    snapshots: dict[int, list[NavSnapshotRow]]
    marks: dict[int, list[NavMarkRow]]
    fees: dict[int, list[BorrowFeeRow]] = field(default_factory=dict)
    margin_calls: dict[int, list[MarginCallRow]] = field(default_factory=dict)


class _Collector:
    """Collects breaches, naming each account's agent and market."""

    def __init__(self, ledger: _Ledger) -> None:
        self._ledger = ledger
        self.breaches: list[Breach] = []

    def add(
        self,
        account_id: int,
        invariant: str,
        expected: Decimal | None,
        actual: Decimal | None,
        detail: str,
    ) -> None:
        account = self._ledger.accounts.get(account_id)
        self.breaches.append(
            Breach(
                account_id=account_id,
                agent_name=self._ledger.agent_names.get(account.agent_id, "?") if account else "?",
                market=account.market if account else "?",
                invariant=invariant,
                expected=expected,
                actual=actual,
                detail=detail,
            )
        )


def verify_ledger(engine: Engine) -> VerifyReport:
    """Check every ledger invariant on the database behind `engine`."""
    ledger = _load(engine)
    out = _Collector(ledger)
    for account_id, account in sorted(ledger.accounts.items()):
        fills = ledger.fills.get(account_id, [])
        actions = ledger.actions.get(account_id, [])
        fees = ledger.fees.get(account_id, [])
        positions = ledger.positions.get(account_id, [])
        _check_balances(account, fills, actions, positions, out, fees)
        _check_fills(account, fills, ledger, out)
        _check_actions(account, fills, actions, out)
        _check_fees(account, fills, actions, fees, out)
        snapshots = ledger.snapshots.get(account_id, [])
        _check_missing_fees(account, fills, actions, fees, snapshots, out)
        _check_margin_calls(account, ledger.margin_calls.get(account_id, []), ledger, out)
        for snapshot in snapshots:
            marks = ledger.marks.get(_id(snapshot.id), [])
            _check_snapshot(account, snapshot, fills, actions, marks, out, fees)
    _check_orders(ledger, out)
    return VerifyReport(
        accounts=len(ledger.accounts),
        fills=sum(len(fills) for fills in ledger.fills.values()),
        snapshots=sum(len(snapshots) for snapshots in ledger.snapshots.values()),
        breaches=out.breaches,
        actions=sum(len(actions) for actions in ledger.actions.values()),
        borrow_fees=sum(len(fees) for fees in ledger.fees.values()),
        margin_calls=sum(len(calls) for calls in ledger.margin_calls.values()),
    )


_R = TypeVar("_R")


def _id(value: int | None) -> int:
    return value if value is not None else -1


def _grouped(rows: Iterable[_R], key: Callable[[_R], int]) -> dict[int, list[_R]]:
    """`rows` in lists by `key`, each list in the order of `rows` (a missing key reads [])."""
    groups: dict[int, list[_R]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    return groups


def _load(engine: Engine) -> _Ledger:
    with Session(engine, expire_on_commit=False) as session, session.begin():
        accounts = {_id(row.id): row for row in session.exec(select(AccountRow))}
        agents = {_id(row.id): row.name for row in session.exec(select(AgentRow))}
        cycles = {_id(row.id): row for row in session.exec(select(CycleRow))}
        orders = {_id(row.id): row for row in session.exec(select(OrderRow))}
        fills = _grouped(
            session.exec(select(FillRow).order_by(col(FillRow.id))), lambda row: row.account_id
        )
        actions = _grouped(
            session.exec(select(CorporateActionRow).order_by(col(CorporateActionRow.id))),
            lambda row: row.account_id,
        )
        positions = _grouped(session.exec(select(PositionRow)), lambda row: row.account_id)
        snapshots = _grouped(
            session.exec(select(NavSnapshotRow).order_by(col(NavSnapshotRow.id))),
            lambda row: row.account_id,
        )
        marks = _grouped(session.exec(select(NavMarkRow)), lambda row: row.snapshot_id)
        fees = _grouped(
            session.exec(select(BorrowFeeRow).order_by(col(BorrowFeeRow.id))),
            lambda row: row.account_id,
        )
        calls = _grouped(
            session.exec(select(MarginCallRow).order_by(col(MarginCallRow.id))),
            lambda row: row.account_id,
        )
    return _Ledger(
        accounts, agents, cycles, orders, fills, actions, positions, snapshots, marks, fees, calls
    )


def _cash_delta(fill: FillRow) -> Decimal:
    if Side(fill.side).pays:  # buy and cover pay, sell and short receive
        return -(fill.notional + fill.fees)
    return fill.notional - fill.fees


def _quantity_delta(fill: FillRow) -> Decimal:
    return fill.quantity * Side(fill.side).sign


def _may_short(account: AccountRow) -> bool:
    """Whether `account` may hold shorts: it allows them, in a market whose rules have shorting
    (A-shares never)."""
    return account.allow_short and rules_for(account.market).shorting is not None


def _entries(
    fills: Sequence[FillRow],
    actions: Sequence[CorporateActionRow],
    fees: Sequence[BorrowFeeRow] = (),
) -> Iterator[tuple[str, Decimal, Decimal, str, Side | None]]:
    """(symbol, cash delta, quantity delta, what, side: None for an action or a fee) of each fill,
    action and borrow fee, in the order they were made: an action or fee right after the fill it
    names (actions first, then fees; each in id order)."""
    keyed: list[tuple[tuple[int, int, int], FillRow | CorporateActionRow | BorrowFeeRow]] = [
        ((_id(fill.id), 0, 0), fill) for fill in fills
    ]
    keyed.extend(((entry.after_fill_id or 0, 1, _id(entry.id)), entry) for entry in actions)
    keyed.extend(((fee.after_fill_id or 0, 2, _id(fee.id)), fee) for fee in fees)
    keyed.sort(key=lambda pair: pair[0])
    for _, row in keyed:
        if isinstance(row, FillRow):
            side = Side(row.side)
            yield row.symbol, _cash_delta(row), _quantity_delta(row), f"fill {row.id}", side
        elif isinstance(row, BorrowFeeRow):
            yield row.symbol, -row.amount, Decimal(0), f"borrow fee {row.id}", None
        else:
            what = f"corporate action {row.id}"
            yield row.symbol, row.cash_delta, row.quantity_delta, what, None


def _replay(
    fills: Sequence[FillRow],
    actions: Sequence[CorporateActionRow],
    initial_cash: Decimal,
    fees: Sequence[BorrowFeeRow] = (),
) -> tuple[Decimal, dict[str, Decimal]]:
    """Cash and non-zero holdings after `fills`, `actions` and borrow `fees`, recomputed from
    nothing else."""
    cash = initial_cash
    held: dict[str, Decimal] = defaultdict(Decimal)
    for symbol, cash_delta, quantity_delta, _, _ in _entries(fills, actions, fees):
        cash += cash_delta
        held[symbol] += quantity_delta
    return cash, {symbol: quantity for symbol, quantity in held.items() if quantity != 0}


def _check_balances(
    account: AccountRow,
    fills: Sequence[FillRow],
    actions: Sequence[CorporateActionRow],
    positions: Sequence[PositionRow],
    out: _Collector,
    fees: Sequence[BorrowFeeRow] = (),
) -> None:
    account_id = _id(account.id)
    _check_never_negative(account, fills, actions, out, fees)
    expected_cash, expected_held = _replay(fills, actions, account.initial_cash, fees)
    if account.cash != expected_cash:
        paid = f" + dividends over {len(actions)} corporate actions" if actions else ""
        if fees:
            paid += f" - {len(fees)} borrow fees"
        out.add(
            account_id,
            CASH_BALANCE,
            expected_cash,
            account.cash,
            f"initial {account.initial_cash} + sells - buys - fees over {len(fills)} fills{paid} "
            f"is {expected_cash}, stored cash is {account.cash} {account.currency}",
        )
    if account.cash < 0:
        out.add(account_id, NEGATIVE_CASH, Decimal(0), account.cash, "stored cash is negative")
    stored = {row.symbol: row.quantity for row in positions}
    for symbol in sorted(set(stored) | set(expected_held)):
        expected = expected_held.get(symbol, Decimal(0))
        actual = stored.get(symbol, Decimal(0))
        if expected != actual:
            out.add(
                account_id,
                POSITION_QUANTITY,
                expected,
                actual,
                f"{symbol}: sum of fills and splits is {expected}, position row holds {actual}",
            )
        if actual < 0 and not _may_short(account):
            out.add(
                account_id,
                SHORT_NOT_ALLOWED,
                Decimal(0),
                actual,
                f"{symbol} position row is short, but the account may not short",
            )


def _check_never_negative(
    account: AccountRow,
    fills: Sequence[FillRow],
    actions: Sequence[CorporateActionRow],
    out: _Collector,
    fees: Sequence[BorrowFeeRow] = (),
) -> None:
    """Cash stays non-negative after each fill, action and borrow fee, in the order they were
    made; no holding crosses zero (a buy or short only on its own side of zero, a sell within the
    long, a cover within the short, an action keeps the sign); a holding goes negative only in an
    account that may short, and only by a short fill."""
    account_id = _id(account.id)
    may_short = _may_short(account)
    cash = account.initial_cash
    held: dict[str, Decimal] = defaultdict(Decimal)
    cash_reported = False
    reported: set[str] = set()
    for symbol, cash_delta, quantity_delta, what, side in _entries(fills, actions, fees):
        cash += cash_delta
        before = held[symbol]
        after = held[symbol] = before + quantity_delta
        if cash < 0 and not cash_reported:
            cash_reported = True
            out.add(account_id, NEGATIVE_CASH, Decimal(0), cash, f"cash after {what}")
        if symbol in reported:
            continue
        if _crosses(side, before, after):
            reported.add(symbol)
            out.add(
                account_id,
                CROSSES_ZERO,
                before,
                after,
                f"{symbol} goes from {before} to {after} at {what}",
            )
        elif after < 0 and not may_short:
            reported.add(symbol)
            out.add(
                account_id,
                SHORT_NOT_ALLOWED,
                Decimal(0),
                after,
                f"{symbol} is short {after} after {what}, but the account may not short",
            )


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


def _check_fills(
    account: AccountRow, fills: Sequence[FillRow], ledger: _Ledger, out: _Collector
) -> None:
    account_id = _id(account.id)
    by_order: dict[int, list[int]] = defaultdict(list)
    for fill in fills:
        by_order[fill.order_id].append(_id(fill.id))
        _check_fill_link(account_id, fill, ledger, out)
        order = ledger.orders.get(fill.order_id)
        if order is not None:
            _check_fill_matches(account_id, fill, order, out)
        expected = round_money(fill.quantity * fill.price, account.currency)
        if fill.notional != expected:
            out.add(
                account_id,
                FILL_NOTIONAL,
                expected,
                fill.notional,
                f"fill {fill.id}: {fill.quantity} x {fill.price} rounded to "
                f"{account.currency} places",
            )
        if fill.currency != account.currency:
            out.add(
                account_id,
                FILL_CURRENCY,
                None,
                None,
                f"fill {fill.id} is in {fill.currency} on a {account.currency} account",
            )
    for order_id, fill_ids in sorted(by_order.items()):
        if len(fill_ids) > 1:
            out.add(
                account_id,
                ONE_FILL_PER_ORDER,
                Decimal(1),
                Decimal(len(fill_ids)),
                f"order {order_id} has fills {', '.join(map(str, fill_ids))}",
            )


def _check_fill_link(account_id: int, fill: FillRow, ledger: _Ledger, out: _Collector) -> None:
    order = ledger.orders.get(fill.order_id)
    if order is None:
        problem = f"fill {fill.id} names order {fill.order_id}, which does not exist"
    elif order.account_id != account_id:
        problem = f"fill {fill.id} belongs to order {order.id} of account {order.account_id}"
    else:
        cycle = ledger.cycles.get(order.cycle_id)
        if cycle is None:
            problem = f"fill {fill.id}: order {order.id} names missing cycle {order.cycle_id}"
        elif cycle.account_id != account_id:
            problem = (
                f"fill {fill.id}: order {order.id} belongs to cycle {cycle.id} "
                f"of account {cycle.account_id}"
            )
        else:
            return
    out.add(account_id, FILL_ORDER_LINK, None, None, problem)


def _check_fill_matches(account_id: int, fill: FillRow, order: OrderRow, out: _Collector) -> None:
    if (fill.symbol, fill.side) != (order.symbol, order.side):
        out.add(
            account_id,
            FILL_MATCHES_ORDER,
            None,
            None,
            f"fill {fill.id} is {fill.side} {fill.symbol}, "
            f"order {order.id} is {order.side} {order.symbol}",
        )
    if fill.quantity > order.quantity:
        out.add(
            account_id,
            FILL_MATCHES_ORDER,
            order.quantity,
            fill.quantity,
            f"fill {fill.id} quantity exceeds order {order.id}",
        )
    if order.status != OrderStatus.FILLED.value:
        out.add(
            account_id,
            FILL_MATCHES_ORDER,
            None,
            None,
            f"fill {fill.id} belongs to order {order.id}, which is {order.status}",
        )


def _check_orders(ledger: _Ledger, out: _Collector) -> None:
    filled_orders = {fill.order_id for fills in ledger.fills.values() for fill in fills}
    for order_id, order in sorted(ledger.orders.items()):
        cycle = ledger.cycles.get(order.cycle_id)
        if cycle is None or cycle.account_id != order.account_id:
            owner = "missing" if cycle is None else f"of account {cycle.account_id}"
            out.add(
                order.account_id,
                ORDER_CYCLE_LINK,
                None,
                None,
                f"order {order_id} names cycle {order.cycle_id} ({owner})",
            )
        if order.status == OrderStatus.FILLED.value and order_id not in filled_orders:
            out.add(
                order.account_id,
                ONE_FILL_PER_ORDER,
                Decimal(1),
                Decimal(0),
                f"order {order_id} is marked filled but has no fill",
            )


def _check_snapshot(
    account: AccountRow,
    snapshot: NavSnapshotRow,
    fills: Sequence[FillRow],
    actions: Sequence[CorporateActionRow],
    marks: Sequence[NavMarkRow],
    out: _Collector,
    fees: Sequence[BorrowFeeRow] = (),
) -> None:
    account_id = _id(account.id)
    last = snapshot.last_fill_id
    included = [fill for fill in fills if last is not None and _id(fill.id) <= last]
    last_action = snapshot.last_action_id
    applied = [a for a in actions if last_action is not None and _id(a.id) <= last_action]
    # A fee is charged before the snapshots at its `charged_at` are written (daemon/valuation.py).
    charged = [fee for fee in fees if fee.charged_at <= snapshot.at]
    cash, held = _replay(included, applied, account.initial_cash, charged)
    where = f"snapshot {snapshot.id} ({snapshot.kind} at {snapshot.at.isoformat()})"
    if snapshot.cash != cash:
        out.add(
            account_id,
            NAV_SNAPSHOT,
            cash,
            snapshot.cash,
            f"{where}: cash from fills up to {last}, corporate actions up to {last_action} "
            f"and {len(charged)} borrow fees charged by then",
        )
    by_symbol = {mark.symbol: mark for mark in marks}
    for symbol in sorted(set(held) | set(by_symbol)):
        mark = by_symbol.get(symbol)
        expected = held.get(symbol, Decimal(0))
        if mark is None:
            out.add(account_id, NAV_SNAPSHOT, expected, None, f"{where}: no mark for {symbol}")
        elif mark.quantity != expected:
            out.add(
                account_id, NAV_SNAPSHOT, expected, mark.quantity, f"{where}: {symbol} quantity"
            )
        elif mark.value not in _mark_values(mark, account.currency):
            out.add(
                account_id,
                NAV_SNAPSHOT,
                round_money(mark.quantity * mark.price, account.currency),
                mark.value,
                f"{where}: {symbol} value at {mark.price}, by the money rule",
            )
    positions_value = sum((mark.value for mark in marks), Decimal(0))
    if snapshot.positions_value != positions_value:
        out.add(
            account_id,
            NAV_SNAPSHOT,
            positions_value,
            snapshot.positions_value,
            f"{where}: positions value is the sum of its marks",
        )
    if snapshot.nav != snapshot.cash + snapshot.positions_value:
        out.add(
            account_id,
            NAV_SNAPSHOT,
            snapshot.cash + snapshot.positions_value,
            snapshot.nav,
            f"{where}: nav = cash + positions value",
        )


def _mark_values(mark: NavMarkRow, currency: str) -> tuple[Decimal, Decimal]:
    """The values a snapshot may hold for `mark`: `quantity * price` by the money rule, or the
    exact product, which snapshots written before the rule held (they must still verify, or an
    upgraded daemon would pause every account that holds something)."""
    exact = mark.quantity * mark.price
    return round_money(exact, currency), exact


def _check_actions(
    account: AccountRow,
    fills: Sequence[FillRow],
    actions: Sequence[CorporateActionRow],
    out: _Collector,
) -> None:
    """Each entry's entitlement (the holding before its ex-date, from the fills and the earlier
    entries) and its amounts (the dividend; the split's new shares, fraction and cash)."""
    account_id = _id(account.id)
    for entry in actions:
        where = f"corporate action {entry.id} ({entry.kind} of {entry.symbol}, ex {entry.ex_date})"
        if entry.currency != account.currency:
            out.add(
                account_id,
                ACTION_CURRENCY,
                None,
                None,
                f"{where} is in {entry.currency} on a {account.currency} account",
            )
            continue
        held = sum(
            (
                _quantity_delta(fill)
                for fill in fills
                if fill.symbol == entry.symbol and fill.filled_at < entry.ex_at
            ),
            Decimal(0),
        ) + sum(
            (
                other.quantity_delta
                for other in actions
                if other.symbol == entry.symbol and other.ex_at < entry.ex_at
            ),
            Decimal(0),
        )
        if entry.quantity_before != held:
            out.add(
                account_id,
                ACTION_ENTITLEMENT,
                held,
                entry.quantity_before,
                f"{where}: {entry.symbol} held before the ex-date, from the fills and earlier "
                "actions",
            )
        for expected, actual, what in _action_amounts(entry, account.currency):
            if expected != actual:
                out.add(account_id, ACTION_AMOUNT, expected, actual, f"{where}: {what}")


def _action_amounts(
    entry: CorporateActionRow, currency: str
) -> list[tuple[Decimal | None, Decimal | None, str]]:
    """(expected, actual, what) of each amount of `entry` the rules of `markets.actions` fix."""
    held = entry.quantity_before
    if entry.kind == ActionKind.CASH_DIVIDEND.value:
        paid = round_money(held * entry.cash_per_share, currency)
        return [
            (paid, entry.cash_delta, f"{held} x {entry.cash_per_share} per share"),
            (Decimal(0), entry.quantity_delta, "a dividend adds no shares"),
        ]
    after = split_quantity(held, entry.ratio)
    cash: Decimal | None = Decimal(0)
    if entry.fraction:
        cash = None if entry.price is None else round_money(entry.fraction * entry.price, currency)
    return [
        (after, held + entry.quantity_delta + entry.fraction, f"{held} x ratio {entry.ratio}"),
        (cash, entry.cash_delta, f"cash in lieu of {entry.fraction} at {entry.price}"),
    ]


def _held_before(
    fills: Sequence[FillRow], actions: Sequence[CorporateActionRow], symbol: str, at: datetime
) -> Decimal:
    """What the account held of `symbol` just before `at` (negative: a short), from its fills
    and corporate actions."""
    held = sum(
        (_quantity_delta(fill) for fill in fills if fill.symbol == symbol and fill.filled_at < at),
        Decimal(0),
    )
    return held + sum(
        (a.quantity_delta for a in actions if a.symbol == symbol and a.ex_at < at), Decimal(0)
    )


def _check_fees(
    account: AccountRow,
    fills: Sequence[FillRow],
    actions: Sequence[CorporateActionRow],
    fees: Sequence[BorrowFeeRow],
    out: _Collector,
) -> None:
    """Each borrow fee is on a short held at its day's end (the quantity it names, from the
    fills), charged after the day ended, in the account's currency, and its amount is
    `|quantity| x price x rate / 10000 / day_count` by the money rule."""
    account_id = _id(account.id)
    for fee in fees:
        where = f"borrow fee {fee.id} ({fee.symbol} on {fee.day})"
        end = day_end(fee.day)
        held = _held_before(fills, actions, fee.symbol, end)
        if held >= 0 or fee.quantity != held:
            out.add(
                account_id,
                BORROW_FEE,
                held,
                fee.quantity,
                f"{where}: a fee is charged only on a short held at the day's end; the fills "
                f"leave {held}",
            )
            continue
        if fee.charged_at < end:
            out.add(account_id, BORROW_FEE, None, None, f"{where}: charged before the day ended")
        if fee.currency != account.currency:
            out.add(
                account_id,
                BORROW_FEE,
                None,
                None,
                f"{where} is in {fee.currency} on a {account.currency} account",
            )
            continue
        try:
            expected = borrow_fee_at(
                fee.quantity, fee.price, fee.rate_bps, fee.day_count, account.currency
            )
        except ValueError as exc:
            out.add(account_id, BORROW_FEE, None, fee.amount, f"{where}: {exc}")
            continue
        if fee.amount != expected:
            out.add(
                account_id,
                BORROW_FEE,
                expected,
                fee.amount,
                f"{where}: {-fee.quantity} x {fee.price} x {fee.rate_bps} bps / "
                f"{fee.day_count} days",
            )


def _check_missing_fees(
    account: AccountRow,
    fills: Sequence[FillRow],
    actions: Sequence[CorporateActionRow],
    fees: Sequence[BorrowFeeRow],
    snapshots: Sequence[NavSnapshotRow],
    out: _Collector,
) -> None:
    """Each calendar day (UTC) the account ended short a symbol (its fills and corporate actions
    before the day's end leave it negative), if the day ended by the account's latest NAV
    snapshot, has its `borrow_fee` row: fees are charged before the first snapshot after the day
    ended (`daemon/valuation.py`), so by the latest one every such day is charged."""
    if not snapshots:
        return
    latest = max(snapshot.at for snapshot in snapshots)
    last_day = last_ended_day(latest)
    events = sorted(
        [(fill.filled_at, fill.symbol, _quantity_delta(fill)) for fill in fills]
        + [(entry.ex_at, entry.symbol, entry.quantity_delta) for entry in actions],
        key=lambda event: event[0],
    )
    charged = {(fee.symbol, fee.day) for fee in fees}
    account_id = _id(account.id)
    held: dict[str, Decimal] = defaultdict(Decimal)
    index = 0
    while index < len(events):
        day = events[index][0].astimezone(UTC).date()  # the next day a holding moved
        while day <= last_day:
            end = day_end(day)
            while index < len(events) and events[index][0] < end:
                _, symbol, delta = events[index]
                held[symbol] += delta
                index += 1
            shorts = sorted(symbol for symbol, quantity in held.items() if quantity < 0)
            if not shorts:
                break  # nothing is due until the next fill or action
            for symbol in shorts:
                if (symbol, day) not in charged:
                    out.add(
                        account_id,
                        MISSING_BORROW_FEE,
                        held[symbol],
                        None,
                        f"no borrow fee charged for {symbol} on {day}: the account ended that "
                        f"day (UTC) short {-held[symbol]} {symbol}, before its latest NAV "
                        f"snapshot at {latest.isoformat()}",
                    )
            day += timedelta(days=1)
        else:
            return


def _check_margin_calls(
    account: AccountRow, calls: Sequence[MarginCallRow], ledger: _Ledger, out: _Collector
) -> None:
    """Each margin call has its cover: a filled `cover` order of the account, in the cycle the
    row names, whose reason is the margin call's."""
    account_id = _id(account.id)
    filled = {fill.order_id: fill for fill in ledger.fills.get(account_id, [])}
    for call in calls:
        where = f"margin call {call.id} (order {call.order_id})"
        order = ledger.orders.get(call.order_id)
        fill = filled.get(call.order_id)
        problem = None
        if order is None or order.account_id != account_id:
            problem = "its order is missing or of another account"
        elif order.cycle_id != call.cycle_id:
            problem = f"its order is of cycle {order.cycle_id}, the row names {call.cycle_id}"
        elif order.side != Side.COVER.value:
            problem = f"its order is a {order.side}, not a cover"
        elif fill is None:
            problem = "its cover has no fill"
        elif not call.reason.startswith(MARGIN_CALL) or order.reason != call.reason:
            problem = f"the order's reason {order.reason!r} is not the call's {call.reason!r}"
        if problem is not None:
            out.add(account_id, MARGIN_CALL_COVER, None, None, f"{where}: {problem}")
