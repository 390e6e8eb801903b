"""What each account holds now: its cash and open positions, each with the price it was last marked.

This module owns that read, for `openbell positions`: an account's cash is the ledger's running
balance, a position's quantity (negative for a short) and cost basis (the cash spent on what is
still held, fees included; for a short, the proceeds still open) come from the `position` table,
and its last mark is the price in the latest NAV snapshot of the account that values the symbol.
A holding's value is its quantity at that mark, by the money rule (`round_money`) as the snapshot
values it (negative for a short), and its weight is that value over the account's NAV at the last
marks (cash plus every value); a holding never marked yet has neither, and then the account has
no NAV. Reads only; money stays `Decimal`.

Two valuations of an account are current at once, and each surface names the one it shows
(`NAV_AT_LAST_MARKS`, `NAV_AT_LAST_SLOT`): the NAV at the last marks (`AccountHoldings.nav`, each
holding at its newest mark, which after a session's close is the close snapshot's), and the NAV
of the account's last slot snapshot (`AccountHoldings.slot_nav`, what the leaderboard's final NAV
is). They differ when a session closed after the last slot (crypto's midnight close, a market's
close after its last hourly slot); both are read here so a page can show them side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Connection, Engine, and_, func, select

from openbell.markets.domain import round_money
from openbell.store.core_tables import (
    ACCOUNT_TABLE,
    AGENT_TABLE,
    NAV_MARK_TABLE,
    NAV_SNAPSHOT_TABLE,
    POSITION_TABLE,
)
from openbell.store.records import SnapshotKind
from openbell.store.rows import row_id

#: The name of `AccountHoldings.nav`'s valuation: each holding at its newest mark.
NAV_AT_LAST_MARKS = "last_marks"
#: The name of the valuation of the account's last slot snapshot (the leaderboard's final NAV).
NAV_AT_LAST_SLOT = "last_slot"


@dataclass(frozen=True, slots=True, kw_only=True)
class Holding:
    """One open position: quantity, cost basis and its last mark (None before its first), in
    `currency`."""

    symbol: str
    quantity: Decimal
    cost: Decimal
    last_mark: Decimal | None
    marked_at: datetime | None
    currency: str

    @property
    def value(self) -> Decimal | None:
        """The quantity at the last mark, by the money rule."""
        if self.last_mark is None:
            return None
        return round_money(self.quantity * self.last_mark, self.currency)


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountHoldings:
    """An account's cash and open positions, in symbol order."""

    account_id: int
    agent: str
    market: str
    currency: str
    cash: Decimal
    holdings: tuple[Holding, ...]
    #: The NAV of the account's newest slot snapshot and its instant (None before its first).
    slot_nav: Decimal | None = None
    slot_nav_at: datetime | None = None

    @property
    def marked_at(self) -> datetime | None:
        """The newest mark of any holding: the instant `nav` is valued at (None without one)."""
        found = [holding.marked_at for holding in self.holdings if holding.marked_at is not None]
        return max(found) if found else None

    @property
    def nav(self) -> Decimal | None:
        """Cash plus every holding's value; None while a holding has no mark."""
        values = [holding.value for holding in self.holdings]
        if any(value is None for value in values):
            return None
        return self.cash + sum((value for value in values if value is not None), Decimal(0))

    def weight(self, amount: Decimal | None) -> Decimal | None:
        """`amount` (a holding's value, or the cash) as a share of the NAV."""
        nav = self.nav
        if amount is None or nav is None or nav <= 0:
            return None
        return amount / nav


def account_holdings(
    engine: Engine, *, market: str | None = None, agent: str | None = None
) -> list[AccountHoldings]:
    """Every account (of `market`, of `agent`, when given) with its cash and open positions,
    ordered by market (us, cn, crypto) then agent name."""
    accounts = select(
        ACCOUNT_TABLE.c.id,
        AGENT_TABLE.c.name,
        ACCOUNT_TABLE.c.market,
        ACCOUNT_TABLE.c.currency,
        ACCOUNT_TABLE.c.cash,
    ).join(AGENT_TABLE, AGENT_TABLE.c.id == ACCOUNT_TABLE.c.agent_id)
    if market is not None:
        accounts = accounts.where(ACCOUNT_TABLE.c.market == market)
    if agent is not None:
        accounts = accounts.where(AGENT_TABLE.c.name == agent)
    with engine.connect() as connection:
        found = connection.execute(accounts).all()
        ids = [row_id(row[0]) for row in found]
        positions = connection.execute(
            select(
                POSITION_TABLE.c.account_id,
                POSITION_TABLE.c.symbol,
                POSITION_TABLE.c.quantity,
                POSITION_TABLE.c.cost,
            )
            .where(POSITION_TABLE.c.account_id.in_(ids))
            .order_by(POSITION_TABLE.c.account_id, POSITION_TABLE.c.symbol)
        ).all()
        marks = _last_marks(connection, ids)
        slot_navs = _last_slot_navs(connection, ids)
    currencies = {row_id(row[0]): row[3] for row in found}
    held: dict[int, list[Holding]] = {}
    for account_id, symbol, quantity, cost in positions:
        if quantity == 0:  # compared in Python: the column is text on SQLite
            continue
        mark = marks.get((account_id, symbol))
        held.setdefault(account_id, []).append(
            Holding(
                symbol=symbol,
                quantity=quantity,
                cost=cost,
                last_mark=mark[0] if mark else None,
                marked_at=mark[1] if mark else None,
                currency=currencies[account_id],
            )
        )
    order = {"us": 0, "cn": 1, "crypto": 2}
    return sorted(
        (
            AccountHoldings(
                account_id=row_id(account_id),
                agent=name,
                market=market_name,
                currency=currency,
                cash=cash,
                holdings=tuple(held.get(row_id(account_id), ())),
                slot_nav=slot_navs.get(row_id(account_id), (None, None))[0],
                slot_nav_at=slot_navs.get(row_id(account_id), (None, None))[1],
            )
            for account_id, name, market_name, currency, cash in found
        ),
        key=lambda a: (order.get(a.market, 9), a.agent),
    )


def _last_marks(
    connection: Connection, ids: Sequence[int]
) -> dict[tuple[int, str], tuple[Decimal, datetime]]:
    """The latest mark (price and instant) of each symbol each of accounts `ids` was valued at."""
    snapshot, mark = NAV_SNAPSHOT_TABLE, NAV_MARK_TABLE
    latest = (
        select(
            snapshot.c.account_id.label("account_id"),
            mark.c.symbol.label("symbol"),
            func.max(snapshot.c.at).label("at"),
        )
        .join(mark, mark.c.snapshot_id == snapshot.c.id)
        .where(snapshot.c.account_id.in_(ids))
        .group_by(snapshot.c.account_id, mark.c.symbol)
        .subquery()
    )
    rows = connection.execute(
        select(snapshot.c.account_id, mark.c.symbol, mark.c.price, snapshot.c.at)
        .join(mark, mark.c.snapshot_id == snapshot.c.id)
        .join(
            latest,
            and_(
                snapshot.c.account_id == latest.c.account_id,
                mark.c.symbol == latest.c.symbol,
                snapshot.c.at == latest.c.at,
            ),
        )
    ).all()
    return {(account_id, symbol): (price, at) for account_id, symbol, price, at in rows}


def _last_slot_navs(
    connection: Connection, ids: Sequence[int]
) -> dict[int, tuple[Decimal, datetime]]:
    """The NAV and instant of the newest slot snapshot of each of accounts `ids` that has one."""
    snapshot = NAV_SNAPSHOT_TABLE
    slot = snapshot.c.kind == SnapshotKind.SLOT.value
    latest = (
        select(snapshot.c.account_id.label("account_id"), func.max(snapshot.c.at).label("at"))
        .where(snapshot.c.account_id.in_(ids), slot)
        .group_by(snapshot.c.account_id)
        .subquery()
    )
    rows = connection.execute(
        select(snapshot.c.account_id, snapshot.c.nav, snapshot.c.at)
        .join(
            latest,
            and_(
                snapshot.c.account_id == latest.c.account_id,
                snapshot.c.at == latest.c.at,
            ),
        )
        .where(slot)
    ).all()
    return {row_id(account_id): (nav, at) for account_id, nav, at in rows}
