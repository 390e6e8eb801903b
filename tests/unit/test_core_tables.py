"""The Core tables (`store/core_tables.py`) and the SQLModel classes (`store/tables.py`) declare one
schema: every table, column, index and constraint compiles to the same DDL in SQLite's and
Postgres' dialects, and each column has the same type, nullability and defaults."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateIndex, CreateTable
from sqlmodel import SQLModel

from openbell.store import core_tables
from openbell.store import tables as _tables  # noqa: F401  (registers the ORM tables)

DIALECTS = {"sqlite": sqlite.dialect(), "postgresql": postgresql.dialect()}


def _ddl(table: sa.Table, dialect: sa.Dialect) -> list[str]:
    """The table's CREATE TABLE lines (sorted: a constraint's place among them carries no
    meaning) and its CREATE INDEX statements, compiled in `dialect`."""
    lines = sorted(
        line.strip().rstrip(",")
        for line in str(CreateTable(table).compile(dialect=dialect)).splitlines()
    )
    indexes = sorted(str(CreateIndex(index).compile(dialect=dialect)) for index in table.indexes)
    return [line for line in lines if line] + indexes


def _column(column: sa.Column[Any]) -> tuple[object, ...]:
    default = column.default
    server = column.server_default
    return (
        # SQLModel's `AutoString` is a `String` that asks MySQL for a length: the same type here.
        "String" if type(column.type).__name__ == "AutoString" else type(column.type).__name__,
        column.nullable,
        column.primary_key,
        column.autoincrement,
        None if default is None else repr(getattr(default, "arg", default)),
        None if server is None else str(getattr(server, "arg", server)),
        sorted(key.target_fullname for key in column.foreign_keys),
    )


def test_the_same_tables_are_declared() -> None:
    assert sorted(core_tables.METADATA.tables) == sorted(SQLModel.metadata.tables)


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_table_compiles_to_the_same_ddl(dialect: str) -> None:
    for name, core in core_tables.METADATA.tables.items():
        orm = SQLModel.metadata.tables[name]
        assert _ddl(core, DIALECTS[dialect]) == _ddl(orm, DIALECTS[dialect]), name


def test_every_column_has_the_same_type_and_defaults() -> None:
    for name, core in core_tables.METADATA.tables.items():
        orm = SQLModel.metadata.tables[name]
        assert [column.name for column in core.columns] == [column.name for column in orm.columns]
        for column in core.columns:
            assert _column(column) == _column(orm.columns[column.name]), f"{name}.{column.name}"


def test_a_difference_is_caught() -> None:
    """The comparison sees a changed default, a dropped index and a dropped constraint."""
    copy = sa.MetaData(naming_convention=core_tables.NAMING_CONVENTION)
    for table in core_tables.METADATA.sorted_tables:
        table.to_metadata(copy)
    account, fill = core_tables.METADATA.tables["account"], core_tables.METADATA.tables["fill"]
    copy.tables["account"].c.paused.default = sa.ColumnDefault(True)
    assert _column(copy.tables["account"].c.paused) != _column(account.c.paused)
    copy.tables["fill"].indexes.clear()
    assert _ddl(copy.tables["fill"], DIALECTS["sqlite"]) != _ddl(fill, DIALECTS["sqlite"])
    checks = [k for k in copy.tables["account"].constraints if isinstance(k, sa.CheckConstraint)]
    copy.tables["account"].constraints.discard(checks[0])
    assert _ddl(copy.tables["account"], DIALECTS["postgresql"]) != _ddl(
        account, DIALECTS["postgresql"]
    )
