"""The ledger's masking keys, on real SQLite and Postgres: a key is stored once with its aliases,
read back exactly, extended only by aliases of new symbols, and never changed by a later save (a
concurrent writer's different key loses, whole)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from openbell.markets.domain import utc
from openbell.store.ledger import Ledger
from openbell.store.masking_keys import MaskingKey


def account(ledger: Ledger, name: str = "blind") -> int:
    agent = ledger.ensure_agent(name, "llm", utc(2000, 1, 1))
    return ledger.open_account(agent, "us", "USD", Decimal(10000), utc(2000, 1, 1))


def key(account_id: int, **aliases: str) -> MaskingKey:
    return MaskingKey(
        account_id=account_id,
        epoch=date(2024, 11, 23),
        money_unit=Decimal("1.3721"),
        aliases=aliases,
    )


def test_a_key_is_stored_once_and_read_back_exactly(ledger: Ledger) -> None:
    account_id = account(ledger)
    assert ledger.masking_key(account_id) is None
    made = key(account_id, AAPL="asset_4945", MSFT="asset_0017")
    assert ledger.save_masking_key(made) == made
    assert ledger.masking_key(account_id) == made
    assert ledger.save_masking_key(made) == made  # saving it again changes nothing


def test_a_key_only_ever_gains_aliases(ledger: Ledger) -> None:
    account_id = account(ledger)
    first = ledger.save_masking_key(key(account_id, AAPL="asset_4945"))
    grown = ledger.save_masking_key(key(account_id, AAPL="asset_4945", ZS="asset_0002"))
    assert dict(grown.aliases) == {"AAPL": "asset_4945", "ZS": "asset_0002"}
    # a save that disagrees keeps what is stored: the epoch, the unit and every stored alias
    other = MaskingKey(
        account_id=account_id,
        epoch=date(2020, 1, 1),
        money_unit=Decimal("0.61"),
        aliases={"AAPL": "asset_0001", "NVDA": "asset_0003"},
    )
    found = ledger.save_masking_key(other)
    assert (found.epoch, found.money_unit) == (first.epoch, first.money_unit)
    assert dict(found.aliases) == {"AAPL": "asset_4945", "NVDA": "asset_0003", "ZS": "asset_0002"}


def test_a_key_giving_two_symbols_one_alias_is_refused() -> None:
    with pytest.raises(ValueError, match="one alias"):
        key(1, AAPL="asset_4945", MSFT="asset_4945")


def test_an_alias_taken_by_another_symbol_leaves_the_stored_key_whole(ledger: Ledger) -> None:
    account_id = account(ledger)
    stored = ledger.save_masking_key(key(account_id, AAPL="asset_4945"))
    racing = key(account_id, MSFT="asset_4945")  # another writer's key gave MSFT AAPL's alias
    assert ledger.save_masking_key(racing) == stored
    assert ledger.masking_key(account_id) == stored


def test_keys_are_per_account(ledger: Ledger) -> None:
    first, second = account(ledger, "one"), account(ledger, "two")
    ledger.save_masking_key(key(first, AAPL="asset_4945"))
    ledger.save_masking_key(key(second, AAPL="asset_4945"))  # the same alias in another account
    assert ledger.masking_key(first) == key(first, AAPL="asset_4945")
    assert ledger.masking_key(second) == key(second, AAPL="asset_4945")
