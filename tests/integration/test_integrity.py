"""`store.integrity` on real databases: a sound ledger passes; the exactly-once index of `cycle`
dropped (both engines) or left invalid (Postgres) is caught, by name, as a `ledger verify` would
report it."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from openbell.markets.errors import DatabaseDamaged
from openbell.store.integrity import check_integrity


def _cycle_unique_index(engine: Engine) -> str:
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            rows = connection.exec_driver_sql("PRAGMA index_list(cycle)").all()
            return next(str(row[1]) for row in rows if row[2] and row[3] != "pk")
        return str(
            connection.execute(
                text(
                    "SELECT conname FROM pg_constraint "
                    "WHERE conrelid = to_regclass('cycle') AND contype = 'u'"
                )
            ).scalar_one()
        )


def test_a_sound_ledger_passes_both_checks(engine: Engine) -> None:
    check_integrity(engine)
    check_integrity(engine, thorough=True)


def test_a_dropped_unique_index_of_cycle_is_caught(engine: Engine) -> None:
    name = _cycle_unique_index(engine)
    with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            # SQLite cannot drop a constraint's own index: the table is made again without it.
            connection.exec_driver_sql("PRAGMA foreign_keys = OFF")
            sql = connection.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'cycle'"
            ).scalar_one()
            connection.exec_driver_sql("ALTER TABLE cycle RENAME TO cycle_old")
            connection.exec_driver_sql(
                sql.replace("UNIQUE (account_id, slot_at)", "CHECK (1)").replace(
                    "CREATE TABLE cycle_old", "CREATE TABLE cycle"
                )
            )
            connection.exec_driver_sql("INSERT INTO cycle SELECT * FROM cycle_old")
            connection.exec_driver_sql("DROP TABLE cycle_old")
        else:
            connection.execute(text(f'ALTER TABLE cycle DROP CONSTRAINT "{name}"'))
    with pytest.raises(
        DatabaseDamaged, match=r"cycle has no unique index on \(account_id, slot_at\)"
    ):
        check_integrity(engine, thorough=True)


def test_an_invalid_unique_index_of_cycle_is_caught_on_postgres(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("pg_index.indisvalid is Postgres's")
    name = _cycle_unique_index(engine)
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(:name)"),
            {"name": name},
        )
    with pytest.raises(DatabaseDamaged, match=f"index {name} of table cycle is not valid"):
        check_integrity(engine)
