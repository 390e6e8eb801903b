"""A new SQLite ledger made without Alembic (`store.migrate.HEAD_SQLITE`) is exactly the one the
migrations make, and a ledger at the head is upgraded by leaving it as it is, on both ledgers.

Alembic's batch migrations on SQLite recreate a table with its named constraints in an order that
and its indexes in an order that varies from one process to the next (a set's), so two migrated
ledgers compare with the schema's objects sorted by name and each table's constraints sorted;
everything else (columns in order, their types, every index's and constraint's text) is compared
as SQLite recorded it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command

from openbell.store.db import check_schema, make_engine, recorded_revision, shipped_head
from openbell.store.migrate import (
    HEAD_SQLITE,
    _head_without_alembic,
    alembic_config,
    head_sqlite_statements,
    sqlite_schema_text,
    upgrade,
)


def _migrated_by_alembic(url: str) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), "head")
    finally:
        engine.dispose()


def _normalized(sql: str | None) -> object:
    """A `CREATE TABLE` statement with its constraints sorted (module docstring); others as is."""
    if sql is None or not sql.startswith("CREATE TABLE"):
        return sql
    head, _, body = sql.partition("(\n")
    parts = body.removesuffix("\n)").split(", \n")
    columns = [part for part in parts if not part.lstrip().startswith("CONSTRAINT")]
    constraints = sorted(part for part in parts if part.lstrip().startswith("CONSTRAINT"))
    assert len(constraints) + len(columns) == len(parts)
    return head, columns, constraints


Everything = tuple[list[object], dict[str, list[tuple[object, ...]]]]


def _everything(database: Path) -> Everything:
    """`sqlite_master` by name (constraints sorted), its persistent pragmas, and every row."""
    connection = sqlite3.connect(database)
    try:
        objects = connection.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        pragmas = [
            connection.execute(f"PRAGMA {name}").fetchone()
            for name in ("user_version", "application_id", "journal_mode", "auto_vacuum")
        ]
        rows = {
            name: connection.execute(f'SELECT * FROM "{name}"').fetchall()  # noqa: S608
            for kind, name, _table, _sql in objects
            if kind == "table"
        }
    finally:
        connection.close()
    schema = [(kind, name, table, _normalized(sql)) for kind, name, table, sql in objects]
    return [*schema, *pragmas], rows


def test_a_new_sqlite_ledger_gets_exactly_the_migrations_schema(tmp_path: Path) -> None:
    by_alembic, by_file = tmp_path / "alembic.db", tmp_path / "file.db"
    _migrated_by_alembic(f"sqlite:///{by_alembic.as_posix()}")
    engine = make_engine(f"sqlite:///{by_file.as_posix()}")
    try:
        assert _head_without_alembic(engine) == shipped_head()  # the file's way was taken
        assert check_schema(engine) == shipped_head()
    finally:
        engine.dispose()
    schema, rows = _everything(by_file)
    assert len(schema) > 40  # tables and indexes, not an empty comparison
    assert rows["alembic_version"] == [(shipped_head(),)]
    assert (schema, rows) == _everything(by_alembic)


def test_the_shipped_schema_file_is_the_heads(tmp_path: Path) -> None:
    """A new migration must come with `python -m openbell.store.migrate` (which rewrites it)."""
    database = tmp_path / "head.db"
    _migrated_by_alembic(f"sqlite:///{database.as_posix()}")
    shipped = HEAD_SQLITE.read_text(encoding="utf-8").split(";\n")
    current = sqlite_schema_text(database).split(";\n")
    assert shipped[0] == current[0]  # the revision line and the first statement
    assert sorted(str(_normalized(sql)) for sql in shipped) == sorted(
        str(_normalized(sql)) for sql in current
    )


def test_a_schema_file_of_another_revision_is_not_used(tmp_path: Path) -> None:
    stale = tmp_path / "head_sqlite.sql"
    stale.write_text(HEAD_SQLITE.read_text(encoding="utf-8").replace(shipped_head(), "0001", 1))
    assert head_sqlite_statements(shipped_head(), stale) is None
    assert head_sqlite_statements(shipped_head()) is not None


def test_a_sqlite_file_with_any_schema_object_is_left_to_alembic(tmp_path: Path) -> None:
    database = tmp_path / "other.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE unrelated (x INTEGER)")
    engine = make_engine(f"sqlite:///{database.as_posix()}")
    try:
        assert _head_without_alembic(engine) is None
    finally:
        engine.dispose()


def test_an_older_ledger_is_migrated_by_alembic_to_the_head(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), "0024")
        assert _head_without_alembic(engine) is None
        assert upgrade(db_url) == shipped_head()
        assert recorded_revision(engine) == shipped_head()
    finally:
        engine.dispose()


@pytest.mark.parametrize("how", ["alembic", "upgrade"])
def test_a_ledger_at_the_head_is_left_as_it_is(db_url: str, how: str) -> None:
    if how == "alembic":
        _migrated_by_alembic(db_url)
    else:
        upgrade(db_url)
    engine = make_engine(db_url)
    try:
        assert _head_without_alembic(engine) == shipped_head()
        assert upgrade(db_url) == shipped_head()
        assert check_schema(engine) == shipped_head()
    finally:
        engine.dispose()
