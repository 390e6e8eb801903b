"""Masking keys: what each masked account's model is shown instead of the real thing, stored once.

This module owns the `masking_key` and `masking_alias` tables' reads and writes and the
`MaskingKey` record, on behalf of `Ledger` (which exposes them as `masking_key` and
`save_masking_key`). A key is made by the agents' masking (`agents/masking.py`) at an account's
first masked cycle: symbol -> `asset_NNNN` aliases, the day its `day_+N` labels count from, and its
secret money unit. Once stored, nothing in it changes; a universe that gains a member gets the
member's alias added. So a restarted daemon, a resumed replay and a report all read the same map.
Saving writes only what is missing, in one transaction; when another writer got there first (a
unique key collides), the stored key is returned and the caller's is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Final

from sqlalchemy import Connection, Engine, bindparam, insert, select
from sqlalchemy.exc import IntegrityError

from openbell.store.core_tables import MASKING_ALIAS_TABLE, MASKING_KEY_TABLE


@dataclass(frozen=True, slots=True, kw_only=True)
class MaskingKey:
    """One account's masking key: `aliases` (symbol -> alias), `epoch` (day 0 of the day labels)
    and `money_unit` (a real amount of money is shown divided by it, under price rebasing)."""

    account_id: int
    epoch: date
    money_unit: Decimal
    aliases: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.money_unit > 0:
            raise ValueError(f"a money unit must be positive, got {self.money_unit}")
        if len(set(self.aliases.values())) != len(self.aliases):
            raise ValueError(f"account {self.account_id}'s key gives two symbols one alias")


def read_masking_key(engine: Engine, account_id: int) -> MaskingKey | None:
    """The stored key of `account_id`, or None when it has none yet."""
    with engine.connect() as connection:
        return _read(connection, account_id)


def save_masking_key(engine: Engine, key: MaskingKey) -> MaskingKey:
    """Store what of `key` is not stored yet (the key row, missing aliases); the stored key.

    A stored key row is kept as it is; an alias already stored for a symbol is never replaced.
    """
    try:
        with engine.begin() as connection:
            stored = connection.execute(_KEY, {"account": key.account_id}).first()
            if stored is None:
                connection.execute(
                    insert(MASKING_KEY_TABLE).values(
                        account_id=key.account_id, epoch=key.epoch, money_unit=key.money_unit
                    )
                )
            known = set(connection.execute(_SYMBOLS, {"account": key.account_id}).scalars())
            missing = [
                {"account_id": key.account_id, "symbol": symbol, "alias": alias}
                for symbol, alias in key.aliases.items()
                if symbol not in known
            ]
            if missing:
                connection.execute(insert(MASKING_ALIAS_TABLE), missing)
    except IntegrityError:
        pass  # a concurrent writer stored its key (or aliases) first: theirs is the key
    found = read_masking_key(engine, key.account_id)
    if found is None:
        raise RuntimeError(f"account {key.account_id}'s masking key was not stored")
    return found


def _read(connection: Connection, account_id: int) -> MaskingKey | None:
    row = connection.execute(_KEY, {"account": account_id}).first()
    if row is None:
        return None
    aliases = connection.execute(_ALIASES, {"account": account_id}).all()
    return MaskingKey(
        account_id=account_id,
        epoch=row.epoch,
        money_unit=row.money_unit,
        aliases={symbol: alias for symbol, alias in sorted(aliases)},
    )


_KEY: Final = select(MASKING_KEY_TABLE.c.epoch, MASKING_KEY_TABLE.c.money_unit).where(
    MASKING_KEY_TABLE.c.account_id == bindparam("account")
)
_ALIASES: Final = select(MASKING_ALIAS_TABLE.c.symbol, MASKING_ALIAS_TABLE.c.alias).where(
    MASKING_ALIAS_TABLE.c.account_id == bindparam("account")
)
_SYMBOLS: Final = select(MASKING_ALIAS_TABLE.c.symbol).where(
    MASKING_ALIAS_TABLE.c.account_id == bindparam("account")
)
