"""The pair a hedging agent picked (Herculean's Hedging workflow), stored once per account.

This module owns the `hedge_pair` table and its reads and writes, on behalf of `Ledger` (of which
`HedgePairs` is a part). A hedging agent (`agents/modes/hedge.py`) picks two of its candidate
assets at its first decided cycle; the pick then holds for every later cycle of the account, as
the paper fixes the pair for the whole trajectory. The row keeps the order the agent gave
(`first`, `second`: Long-Short is long `first` and short `second`), the cycle that picked it and
when. A pick is read point-in-time (`hedge_pair(account_id, at)`: only a pick made at or before
`at`); a second pick for an account is not stored: the one stored first is returned (a cycle run
again after an interruption, or a racing writer, reads the same pair).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, Session, SQLModel, select

from openbell.markets.domain import check_utc
from openbell.store.rows import LedgerTables
from openbell.store.types import UtcDateTime


class HedgePairRow(SQLModel, table=True):
    """The pair one account's hedging agent picked."""

    __tablename__ = "hedge_pair"

    account_id: int = Field(foreign_key="account.id", primary_key=True)
    first_symbol: str
    second_symbol: str
    cycle_id: int = Field(foreign_key="cycle.id")
    picked_at: datetime = Field(sa_type=UtcDateTime)


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
        with self._read() as session:
            row = _row(session, account_id)
        if row is None or row.picked_at > at:
            return None
        return _pick(row)

    def save_hedge_pair(self, pick: HedgePick) -> HedgePick:
        """Store `pick` unless the account has a pair already; the stored pick."""
        try:
            with self._write() as session:
                stored = _row(session, pick.account_id)
                if stored is not None:
                    return _pick(stored)
                session.add(
                    HedgePairRow(
                        account_id=pick.account_id,
                        first_symbol=pick.first,
                        second_symbol=pick.second,
                        cycle_id=pick.cycle_id,
                        picked_at=pick.picked_at,
                    )
                )
                return pick
        except IntegrityError:
            with self._read() as session:
                found = _row(session, pick.account_id)
            if found is None:
                raise
            return _pick(found)


def _row(session: Session, account_id: int) -> HedgePairRow | None:
    return session.exec(select(HedgePairRow).where(HedgePairRow.account_id == account_id)).first()


def _pick(row: HedgePairRow) -> HedgePick:
    return HedgePick(
        account_id=row.account_id,
        first=row.first_symbol,
        second=row.second_symbol,
        cycle_id=row.cycle_id,
        picked_at=row.picked_at,
    )
