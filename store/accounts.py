"""Agents and their accounts: opened once, read as an `AccountState`, paused and resumed.

Internal to `openbell.store`: `Ledger` is made of `Accounts` (with `Cycles` and `Orders`). An
agent is created once by name and an account once per (agent, market), idempotently, so a
restarted daemon or a resumed replay opens the same ones. `account_state` is the account as the
execution rules see it: the stored cash, the open positions (a short has a negative quantity),
whether it may short, and each position's buys since `recent_buys_since` (for T+1). A paused
account (its ledger failed verification) runs no cycles.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import Column, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError

from openbell.markets.domain import (
    AccountState,
    Lot,
    Money,
    Position,
    Side,
    check_currency,
    check_decimal,
    check_market,
    check_utc,
)
from openbell.markets.rules import A_SHARES_NO_SHORTING
from openbell.store.core_tables import ACCOUNT_TABLE, AGENT_TABLE, FILL_TABLE
from openbell.store.rows import LedgerTables, row_id
from openbell.store.snapshots import POSITIONS


def recent_buys_since(now: datetime) -> datetime:
    """Start of the window whose buy fills `account_state` lists as `recent_buys`.

    The window opens at 00:00 UTC of the day before `now`. Every US and A-share session lies
    within one UTC day, so this always covers the current session (all T+1 needs) and the previous
    calendar day; the execution rules decide which of the listed lots are still locked.
    """
    check_utc("now", now)
    return datetime.combine(now.date() - timedelta(days=1), time(0), tzinfo=UTC)


class Accounts(LedgerTables):
    """The agents and accounts of the ledger."""

    def ensure_agent(self, name: str, kind: str, now: datetime) -> int:
        """The id of the agent called `name`, created (with `kind`) if it does not exist yet.

        An existing agent keeps the kind it was created with.
        """
        check_utc("now", now)
        if not name or name != name.strip():
            raise ValueError(f"agent name must be non-empty and trimmed, got {name!r}")
        found = self._agentrow_id(name)
        if found is not None:
            return found
        try:
            with self._writing() as connection:
                added = insert(AGENT_TABLE).values(name=name, kind=kind, created_at=now)
                return row_id(connection.execute(added.returning(AGENT_TABLE.c.id)).scalar_one())
        except IntegrityError:
            found = self._agentrow_id(name)
            if found is None:
                raise
            return found

    def _agentrow_id(self, name: str) -> int | None:
        with self._reading() as connection:
            query = select(AGENT_TABLE.c.id).where(AGENT_TABLE.c.name == name)
            return connection.execute(query).scalar()

    def open_account(
        self,
        agent_id: int,
        market: str,
        currency: str,
        initial_cash: Decimal,
        now: datetime,
        *,
        allow_short: bool = False,
    ) -> int:
        """The id of `agent_id`'s account in `market`, opened with `initial_cash` if new.

        Idempotent on (agent, market): an existing account keeps its cash and history; only its
        `allow_short` follows the config (an agent may opt in to shorting, or out while it has
        never shorted; `ValueError` after). A cn account never allows shorting (`ValueError`).
        """
        check_market(market)
        check_currency(currency)
        check_decimal("initial_cash", initial_cash)
        check_utc("now", now)
        if allow_short and market == "cn":
            raise ValueError(f"agent {agent_id}: {A_SHARES_NO_SHORTING}")
        found = self._accountrow_id(agent_id, market)
        if found is not None:
            self._set_allow_short(found, allow_short)
            return found
        try:
            with self._writing() as connection:
                added = insert(ACCOUNT_TABLE).values(
                    agent_id=agent_id,
                    market=market,
                    currency=currency,
                    initial_cash=initial_cash,
                    cash=initial_cash,
                    paused=False,
                    created_at=now,
                    allow_short=allow_short,
                )
                return row_id(connection.execute(added.returning(ACCOUNT_TABLE.c.id)).scalar_one())
        except IntegrityError:
            found = self._accountrow_id(agent_id, market)
            if found is None:
                raise
            self._set_allow_short(found, allow_short)
            return found

    def _set_allow_short(self, account_id: int, allow_short: bool) -> None:
        """Record the config's `allow_short` on an existing account. An account that has shorted
        keeps it (`ValueError`): `ledger verify` holds every short to its account's permission."""
        with self._writing() as connection:
            current = connection.execute(_ALLOW_SHORT, {"account": account_id}).scalar()
            if current is None or current == allow_short:
                return
            if not allow_short:
                shorted = connection.execute(_SHORTED, {"account": account_id}).first()
                if shorted is not None:
                    raise ValueError(
                        f"account {account_id} has shorted, so it keeps allow_short (ledger "
                        "verify holds its shorts to it); to stop an agent shorting, give it a "
                        "new name"
                    )
            connection.execute(
                update(ACCOUNT_TABLE)
                .where(ACCOUNT_TABLE.c.id == account_id)
                .values(allow_short=allow_short)
            )

    def _accountrow_id(self, agent_id: int, market: str) -> int | None:
        with self._reading() as connection:
            query = select(ACCOUNT_TABLE.c.id).where(
                ACCOUNT_TABLE.c.agent_id == agent_id, ACCOUNT_TABLE.c.market == market
            )
            return connection.execute(query).scalar()

    def account_opened_at(self, account_id: int) -> datetime:
        """When the account was opened."""
        found: datetime = self._account_column(account_id, ACCOUNT_TABLE.c.created_at)
        return found

    def account_of(self, agent_name: str, market: str) -> int | None:
        """The id of agent `agent_name`'s account in `market`, or None when it has none."""
        agent_id = self._agentrow_id(agent_name)
        return None if agent_id is None else self._accountrow_id(agent_id, market)

    def allows_short(self, account_id: int) -> bool:
        """Whether the account may short."""
        found: bool = self._account_column(account_id, ACCOUNT_TABLE.c.allow_short)
        return found

    def initial_cash(self, account_id: int) -> Decimal:
        """The cash the account was opened with."""
        found: Decimal = self._account_column(account_id, ACCOUNT_TABLE.c.initial_cash)
        return found

    def account_state(self, account_id: int, now: datetime) -> AccountState:
        """Cash (the stored balance) and open positions with buys since `recent_buys_since`.

        Prebuilt Core statements in one read transaction: agents read their account several
        times a cycle, so this is on the hot path.
        """
        since = recent_buys_since(now)
        with self._engine.connect() as connection:
            account = connection.execute(_ACCOUNT, {"account": account_id}).one_or_none()
            if account is None:
                raise ValueError(f"no account {account_id}")
            rows = connection.execute(POSITIONS, {"account": account_id}).all()
            buys = connection.execute(_RECENT_BUYS, {"account": account_id, "since": since}).all()
        lots: dict[str, list[Lot]] = {}
        for buy in buys:
            lots.setdefault(buy.symbol, []).append(
                Lot(quantity=buy.quantity, acquired_at=buy.filled_at)
            )
        positions = {
            row.symbol: Position(
                symbol=row.symbol,
                quantity=row.quantity,
                cost=row.cost,
                recent_buys=tuple(lots.get(row.symbol, ())),
            )
            for row in rows
            if row.quantity != 0
        }
        return AccountState(
            market=account.market,
            cash=Money(amount=account.cash, currency=account.currency),
            positions=positions,
            allow_short=account.allow_short,
        )

    def open_positions(self, account_id: int) -> dict[str, Decimal]:
        """Symbol -> signed quantity of each of the account's open positions, in symbol order:
        the positions `account_state` lists, without its cash and recent buys (one read)."""
        with self._engine.connect() as connection:
            rows = connection.execute(POSITIONS, {"account": account_id}).all()
        return {row.symbol: row.quantity for row in rows if row.quantity != 0}

    def _account_column(self, account_id: int, column: Column[Any]) -> Any:
        """One column of the account's row; `ValueError` when there is no such account."""
        with self._reading() as connection:
            found = connection.execute(select(column).where(ACCOUNT_TABLE.c.id == account_id))
            row = found.first()
        if row is None:
            raise ValueError(f"no account {account_id}")
        return row[0]

    def set_paused(self, account_id: int, paused: bool) -> None:
        """Pause (no more cycles) or resume the account."""
        with self._writing() as connection:
            changed = connection.execute(
                update(ACCOUNT_TABLE).where(ACCOUNT_TABLE.c.id == account_id).values(paused=paused)
            )
            if changed.rowcount != 1:
                raise ValueError(f"no account {account_id}")

    def paused(self, account_ids: Collection[int]) -> set[int]:
        """Which of `account_ids` are paused."""
        if not account_ids:
            return set()
        query = select(ACCOUNT_TABLE.c.id).where(
            ACCOUNT_TABLE.c.id.in_(sorted(account_ids)), ACCOUNT_TABLE.c.paused.is_(True)
        )
        with self._reading() as connection:
            return {row_id(found) for found in connection.execute(query).scalars()}


_ACCOUNT: Final = select(
    ACCOUNT_TABLE.c.market,
    ACCOUNT_TABLE.c.cash,
    ACCOUNT_TABLE.c.currency,
    ACCOUNT_TABLE.c.allow_short,
).where(ACCOUNT_TABLE.c.id == bindparam("account"))
#: An account's `allow_short`, its row locked for the update that may follow (Postgres).
_ALLOW_SHORT: Final = (
    select(ACCOUNT_TABLE.c.allow_short)
    .where(ACCOUNT_TABLE.c.id == bindparam("account"))
    .with_for_update()
)
_SHORTED: Final = select(FILL_TABLE.c.id).where(
    FILL_TABLE.c.account_id == bindparam("account"), FILL_TABLE.c.side == Side.SHORT.value
)
_RECENT_BUYS: Final = (
    select(FILL_TABLE.c.symbol, FILL_TABLE.c.quantity, FILL_TABLE.c.filled_at)
    .where(
        FILL_TABLE.c.account_id == bindparam("account"),
        FILL_TABLE.c.side == Side.BUY.value,
        FILL_TABLE.c.filled_at >= bindparam("since"),
    )
    .order_by(FILL_TABLE.c.id)
)
