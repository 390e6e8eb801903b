"""The pair a hedging agent picked (Herculean's Hedging workflow), stored once per account.

This module owns the `hedge_pair` table's reads and writes (the table: `core_tables.py`, and its
ORM class `tables.HedgePairRow`), on behalf of `Ledger` (of which `HedgePairs` is a part). A
hedging agent (`agents/modes/hedge.py`) picks two of its candidate assets at its first decided
cycle; the pick then holds for every later cycle of the account, as the paper fixes the pair for
the whole trajectory. The row keeps the order the agent gave (`first`, `second`: Long-Short is long
`first` and short `second`), the cycle that picked it and when. A pick is read point-in-time
(`hedge_pair(account_id, at)`: only a pick made at or before `at`); a second pick for an account is
not stored: the one stored first is returned (a cycle run again after an interruption, or a racing
writer, reads the same pair).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import Connection, Row, bindparam, insert, select
from sqlalchemy.exc import IntegrityError

from openbell.markets.domain import check_utc
from openbell.store.core_tables import HEDGE_PAIR_TABLE
from openbell.store.rows import LedgerTables


@dataclass(frozen=True, slots=True, kw_only=True)
class HedgePick:
    """Account `account_id` picked the pair (`first`, `second`) at cycle `cycle_id`, `picked_at`."""

    account_id: int
    first: str
    second: str
    cycle_id: int
    picked_at: datetime

    def __post_init__(self) -> None:
        check_utc("picked_at", self.picked_at)
        if not self.first or not self.second or self.first == self.second:
            raise ValueError(f"a pair is two different symbols, got {self.first}, {self.second}")

    @property
    def pair(self) -> tuple[str, str]:
        """(first, second), in the order the agent gave them."""
        return (self.first, self.second)


class HedgePairs(LedgerTables):
    """The hedging agents' picked pairs (see the module docstring)."""

    def hedge_pair(self, account_id: int, at: datetime) -> HedgePick | None:
        """The pair the account picked at or before `at`, or None."""
        check_utc("at", at)
        with self._reading() as connection:
            row = _row(connection, account_id)
        if row is None or row.picked_at > at:
            return None
        return _pick(row)

    def save_hedge_pair(self, pick: HedgePick) -> HedgePick:
        """Store `pick` unless the account has a pair already; the stored pick."""
        try:
            with self._writing() as connection:
                stored = _row(connection, pick.account_id)
                if stored is not None:
                    return _pick(stored)
                connection.execute(
                    insert(HEDGE_PAIR_TABLE).values(
                        account_id=pick.account_id,
                        first_symbol=pick.first,
                        second_symbol=pick.second,
                        cycle_id=pick.cycle_id,
                        picked_at=pick.picked_at,
                    )
                )
                return pick
        except IntegrityError:
            with self._reading() as connection:
                found = _row(connection, pick.account_id)
            if found is None:
                raise
            return _pick(found)


def _row(connection: Connection, account_id: int) -> Row[Any] | None:
    return connection.execute(_PAIR, {"account": account_id}).first()


def _pick(row: Row[Any]) -> HedgePick:
    return HedgePick(
        account_id=row.account_id,
        first=row.first_symbol,
        second=row.second_symbol,
        cycle_id=row.cycle_id,
        picked_at=row.picked_at,
    )


_PAIR: Final = select(HEDGE_PAIR_TABLE).where(HEDGE_PAIR_TABLE.c.account_id == bindparam("account"))
