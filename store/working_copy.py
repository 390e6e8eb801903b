"""An account's working copy in a replay: its cash and positions in memory, moved fill by fill.

In a replay the ledger is the record, not the working copy: the replay's unit of work
(`replay_ledger.py`) reads each of its accounts once (`load_books`), then moves `AccountBook`s in
memory exactly as `orders.insert_order` moves the `account` and `position` rows (cash by the
fill's cash delta; the position by `moved_position`: a buy or short adds quantity and cost, a
sell or cover takes its share of the cost by the money rule, a position closed out is gone),
values them for NAV snapshots exactly as `snapshots.insert_snapshot` does, and writes the books'
cash and positions back with each batch. `AccountBook.state` is the `AccountState` that
`Accounts.account_state` would read at that moment, recent buys (T+1) and `allow_short`
included. A fill the ledger would refuse (cash going negative, a position crossing zero) raises
`LedgerBreach` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Final

from sqlalchemy import BindParameter, Connection, bindparam, func, select

from openbell.markets.domain import (
    AccountState,
    Fill,
    Lot,
    Money,
    Position,
    Side,
    check_decimal,
    currency_of,
    moved_position,
)
from openbell.markets.errors import LedgerBreach
from openbell.store.accounts import recent_buys_since
from openbell.store.core_tables import (
    ACCOUNT_TABLE,
    BORROW_FEE_TABLE,
    CORPORATE_ACTION_TABLE,
    FILL_TABLE,
    POSITION_TABLE,
)
from openbell.store.records import NavMark


@dataclass(slots=True)
class Holding:
    """One open position of a book: the `position` row's quantity, cost and `updated_at`."""

    quantity: Decimal
    cost: Decimal
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class _Buy:
    symbol: str
    quantity: Decimal
    filled_at: datetime


class AccountBook:
    """One account's cash, positions, recent buys and newest fill and action ids, in memory."""

    def __init__(
        self,
        *,
        account_id: int,
        market: str,
        currency: str,
        cash: Decimal,
        holdings: Mapping[str, Holding],
        buys: Collection[tuple[str, Decimal, datetime]],
        last_fill_id: int | None,
        last_action_id: int | None,
        traded: Collection[str],
        first_fill_at: datetime | None,
        allow_short: bool = False,
    ) -> None:
        self.account_id = account_id
        self.market = market
        self.currency = currency
        self.cash = cash
        self.holdings = dict(holdings)
        self._buys = [_Buy(symbol, quantity, at) for symbol, quantity, at in buys]
        self.last_fill_id = last_fill_id
        self.last_action_id = last_action_id
        self.traded = set(traded)
        self.first_fill_at = first_fill_at
        self.allow_short = allow_short
        self._state: tuple[datetime, datetime, AccountState] | None = None
        #: The buys `_state` lists as recent (its positions' lots).
        self._recent: list[_Buy] = []
        #: The open holdings in symbol order, until a fill moves one (`_held`).
        self._open: list[tuple[str, Holding]] | None = None
        self._money = currency_of(currency)  # its rounding: the money rule

    def state(self, now: datetime) -> AccountState:
        """The account as `Accounts.account_state(account, now)` reads it from the ledger."""
        if self._state is not None and self._state[0] == now:  # asked again in the same slot
            return _copy(self._state[2])
        since = recent_buys_since(now)
        if self._state is not None and self._state[1] == since:
            self._state = (now, since, self._state[2])
            return _copy(self._state[2])
        # Buys older than a day before the window can no longer be listed (time only advances).
        self._buys = [buy for buy in self._buys if buy.filled_at >= since - _KEEP_BUYS]
        recent = [buy for buy in self._buys if buy.filled_at >= since]
        if self._state is not None and self._recent == recent:  # the same state, a later window
            self._state = (now, since, self._state[2])
            return _copy(self._state[2])
        self._recent = recent
        lots: dict[str, list[Lot]] = {}
        for buy in recent:
            lots.setdefault(buy.symbol, []).append(
                Lot(quantity=buy.quantity, acquired_at=buy.filled_at)
            )
        state = AccountState(
            market=self.market,
            cash=Money(amount=self.cash, currency=self.currency),
            positions={
                symbol: Position(
                    symbol=symbol,
                    quantity=holding.quantity,
                    cost=holding.cost,
                    recent_buys=tuple(lots.get(symbol, ())),
                )
                for symbol, holding in sorted(self.holdings.items())
                if holding.quantity != 0
            },
            allow_short=self.allow_short,
        )
        self._state = (now, since, state)
        return _copy(state)

    def open_positions(self) -> dict[str, Decimal]:
        """Symbol -> signed quantity of each open position, in symbol order (as
        `Accounts.open_positions` reads them from the ledger)."""
        return {symbol: holding.quantity for symbol, holding in self._held()}

    def _held(self) -> list[tuple[str, Holding]]:
        """The open holdings in symbol order: sorted once, then again after a fill (the runner
        asks twice a slot, and values them for both NAV snapshots)."""
        if self._open is None:
            self._open = [
                (symbol, holding)
                for symbol, holding in sorted(self.holdings.items())
                if holding.quantity != 0
            ]
        return self._open

    def apply(self, fill: Fill, fill_id: int, key: str) -> None:
        """Move cash and the position by `fill` (stored as fill `fill_id` under `key`), as
        `orders.insert_order` moves the rows; `LedgerBreach`, and nothing changed, when cash or
        the holding would go negative."""
        cash = self.cash + fill.cash_delta
        if cash < 0:
            raise LedgerBreach(
                f"account {self.account_id}: fill {key} would leave cash at {cash} {self.currency}"
            )
        holding = self.holdings.get(fill.symbol)
        held = holding.quantity if holding is not None else Decimal(0)
        try:
            quantity, cost = moved_position(
                held, holding.cost if holding is not None else Decimal(0), fill
            )
        except ValueError as exc:
            raise LedgerBreach(f"account {self.account_id}: {exc}") from None
        if quantity == 0:
            self.holdings.pop(fill.symbol, None)
        elif holding is None:
            self.holdings[fill.symbol] = Holding(
                quantity=quantity, cost=cost, updated_at=fill.filled_at
            )
        else:
            holding.quantity, holding.cost, holding.updated_at = quantity, cost, fill.filled_at
        if fill.side is Side.BUY:
            self._buys.append(_Buy(fill.symbol, fill.quantity, fill.filled_at))
        self.cash = cash
        self.last_fill_id = fill_id
        self.traded.add(fill.symbol)
        if self.first_fill_at is None or fill.filled_at < self.first_fill_at:
            self.first_fill_at = fill.filled_at
        self._state = None
        self._open = None

    def difference(self, connection: Connection, stored: AccountState) -> str | None:
        """What differs between this book and the ledger (`stored`, the account as the ledger
        holds it, read on `connection`): its cash and positions as stored, and as `openbell ledger
        verify` recomputes them from the initial cash, the fills and the corporate actions. None
        when nothing does."""
        cash, held = _recomputed(connection, self.account_id)
        open_ = {s: h for s, h in self.holdings.items() if h.quantity != 0}
        mine = {symbol: holding.quantity for symbol, holding in open_.items()}
        costs = {symbol: holding.cost for symbol, holding in open_.items()}
        for what, ours, ledger in (
            ("stored cash", self.cash, stored.cash.amount),
            ("recomputed cash", self.cash, cash),
            ("stored positions", mine, {s: p.quantity for s, p in stored.positions.items()}),
            ("recomputed positions", mine, held),
            ("stored costs", costs, {s: p.cost for s, p in stored.positions.items()}),
        ):
            if ours != ledger:
                return f"the replay's working copy has {what} {ours}, the ledger {ledger}"
        return None

    def value(self, marks: Mapping[str, Decimal], at: datetime) -> dict[str, NavMark]:
        """Each holding valued at its mark by the money rule, in symbol order, as
        `snapshots.insert_snapshot` values them; `ValueError` for a holding without a mark."""
        valued: dict[str, NavMark] = {}
        money = self._money
        for symbol, holding in self._held():
            price = marks.get(symbol)
            if price is None:
                raise ValueError(f"account {self.account_id}: no mark for held {symbol} at {at}")
            if type(price) is not Decimal or not price.is_finite() or not price > 0:
                check_decimal(f"mark of {symbol}", price, positive=True)
            quantity = holding.quantity
            valued[symbol] = NavMark(
                symbol=symbol,
                quantity=quantity,
                price=price,
                value=money.round(quantity * price),
            )
        return valued


#: Buys are kept this long before the T+1 window opens, then forgotten.
_KEEP_BUYS: Final = timedelta(days=1)


def _copy(state: AccountState) -> AccountState:
    """`state` with its own positions dict (callers may hold it while the book moves on)."""
    return AccountState(
        market=state.market,
        cash=state.cash,
        positions=dict(state.positions),
        allow_short=state.allow_short,
    )


def load_books(
    connection: Connection, account_ids: Collection[int], start_at: datetime
) -> dict[int, AccountBook]:
    """The books of `account_ids` as the ledger holds them, for a replay from `start_at` on."""
    ids = sorted(account_ids)
    if not ids:
        return {}
    since = recent_buys_since(start_at) - _KEEP_BUYS
    accounts = connection.execute(_ACCOUNTS, {"ids": ids}).all()
    found = {row.id for row in accounts}
    if missing := set(ids) - found:
        raise ValueError(f"no account {min(missing)}")
    holdings: dict[int, dict[str, Holding]] = {account_id: {} for account_id in ids}
    for row in connection.execute(_POSITIONS, {"ids": ids}):
        holdings[row.account_id][row.symbol] = Holding(
            quantity=row.quantity, cost=row.cost, updated_at=row.updated_at
        )
    buys: dict[int, list[tuple[str, Decimal, datetime]]] = {account_id: [] for account_id in ids}
    for row in connection.execute(_BUYS, {"ids": ids, "since": since}):
        buys[row.account_id].append((row.symbol, row.quantity, row.filled_at))
    fills = {row.account_id: row for row in connection.execute(_FILLS, {"ids": ids})}
    actions = {row[0]: row[1] for row in connection.execute(_ACTIONS, {"ids": ids})}
    traded: dict[int, set[str]] = {account_id: set() for account_id in ids}
    for account_id, symbol in connection.execute(_TRADED, {"ids": ids}):
        traded[account_id].add(symbol)
    return {
        row.id: AccountBook(
            account_id=row.id,
            market=row.market,
            currency=row.currency,
            cash=row.cash,
            holdings=holdings[row.id],
            buys=buys[row.id],
            last_fill_id=fills[row.id].last_id if row.id in fills else None,
            last_action_id=actions.get(row.id),
            traded=traded[row.id],
            first_fill_at=fills[row.id].first_at if row.id in fills else None,
            allow_short=row.allow_short,
        )
        for row in accounts
    }


_IDS: Final[BindParameter[list[int]]] = bindparam("ids", expanding=True)
_ACCOUNTS: Final = select(
    ACCOUNT_TABLE.c.id,
    ACCOUNT_TABLE.c.market,
    ACCOUNT_TABLE.c.currency,
    ACCOUNT_TABLE.c.cash,
    ACCOUNT_TABLE.c.allow_short,
).where(ACCOUNT_TABLE.c.id.in_(_IDS))
_POSITIONS: Final = select(POSITION_TABLE).where(POSITION_TABLE.c.account_id.in_(_IDS))
_BUYS: Final = (
    select(
        FILL_TABLE.c.account_id, FILL_TABLE.c.symbol, FILL_TABLE.c.quantity, FILL_TABLE.c.filled_at
    )
    .where(
        FILL_TABLE.c.account_id.in_(_IDS),
        FILL_TABLE.c.side == Side.BUY.value,
        FILL_TABLE.c.filled_at >= bindparam("since"),
    )
    .order_by(FILL_TABLE.c.id)
)
_FILLS: Final = (
    select(
        FILL_TABLE.c.account_id,
        func.max(FILL_TABLE.c.id).label("last_id"),
        func.min(FILL_TABLE.c.filled_at).label("first_at"),
    )
    .where(FILL_TABLE.c.account_id.in_(_IDS))
    .group_by(FILL_TABLE.c.account_id)
)
_ACTIONS: Final = (
    select(CORPORATE_ACTION_TABLE.c.account_id, func.max(CORPORATE_ACTION_TABLE.c.id))
    .where(CORPORATE_ACTION_TABLE.c.account_id.in_(_IDS))
    .group_by(CORPORATE_ACTION_TABLE.c.account_id)
)
_TRADED: Final = (
    select(FILL_TABLE.c.account_id, FILL_TABLE.c.symbol)
    .where(FILL_TABLE.c.account_id.in_(_IDS))
    .distinct()
)


def _recomputed(connection: Connection, account_id: int) -> tuple[Decimal, dict[str, Decimal]]:
    """The account's cash and holdings recomputed from its initial cash, fills, corporate
    actions and borrow fees, as `openbell ledger verify` does."""
    cash = connection.execute(
        select(ACCOUNT_TABLE.c.initial_cash).where(ACCOUNT_TABLE.c.id == account_id)
    ).scalar_one()
    held: dict[str, Decimal] = {}
    for fill in connection.execute(
        select(
            FILL_TABLE.c.symbol,
            FILL_TABLE.c.side,
            FILL_TABLE.c.quantity,
            FILL_TABLE.c.notional,
            FILL_TABLE.c.fees,
        ).where(FILL_TABLE.c.account_id == account_id)
    ):
        side = Side(fill.side)
        if side.pays:
            cash -= fill.notional + fill.fees
        else:
            cash += fill.notional - fill.fees
        held[fill.symbol] = held.get(fill.symbol, Decimal(0)) + fill.quantity * side.sign
    for action in connection.execute(
        select(
            CORPORATE_ACTION_TABLE.c.symbol,
            CORPORATE_ACTION_TABLE.c.cash_delta,
            CORPORATE_ACTION_TABLE.c.quantity_delta,
        ).where(CORPORATE_ACTION_TABLE.c.account_id == account_id)
    ):
        cash += action.cash_delta
        held[action.symbol] = held.get(action.symbol, Decimal(0)) + action.quantity_delta
    for amount in connection.execute(
        select(BORROW_FEE_TABLE.c.amount).where(BORROW_FEE_TABLE.c.account_id == account_id)
    ).scalars():
        cash -= amount
    return cash, {symbol: quantity for symbol, quantity in held.items() if quantity != 0}
