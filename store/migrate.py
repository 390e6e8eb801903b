"""Applying the Alembic migrations of `openbell.store.migrations`; `openbell db upgrade` calls this.

The Alembic configuration is built in code (no alembic.ini): the script location is the
migrations package directory and the connection is handed to `env.py` through
`Config.attributes`, so URLs with options (such as a Postgres `search_path`) need no escaping.

Upgrading to the head skips Alembic (whose import and run were a sixth of a short replay's
start-up) in the two cases where its work is known in advance: a database already at the head
(`store.db.recorded_revision` reads it as Alembic does) is left as it is, and a new SQLite ledger
(a file with no schema object at all) gets the schema the migrations give it, `HEAD_SQLITE`: the
statements SQLite recorded for every table and index of a ledger migrated from nothing, and its
`alembic_version` row, run in one `BEGIN IMMEDIATE` transaction. `write_head_sqlite` writes that
file from a real migration; `tests/migration/test_fresh_schema.py` checks it is current and that
both ways give the same `sqlite_master` and rows. Any other database (Postgres, an older ledger, a
file for another revision) is migrated by Alembic.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, text

from openbell.store.db import (
    SQLITE_IMMEDIATE,
    make_engine,
    recorded_revision,
    shipped_head,
)

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
#: The schema the migrations give a new SQLite ledger (see the module docstring).
HEAD_SQLITE = MIGRATIONS_DIR / "head_sqlite.sql"
_REVISION_LINE = "-- revision: "
_STATEMENT_END = ";\n"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic `Config` for the store's migrations, bound to `connection` when given."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision this version of openbell ships."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIR}")
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None when it has never been migrated."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(url: str, revision: str = "head") -> str:
    """Migrate the database at `url` up to `revision` (default head); return the one reached.

    To the head, a database already there and a new SQLite ledger are done without Alembic
    (module docstring)."""
    engine = make_engine(url)
    try:
        if revision == "head":
            reached = _head_without_alembic(engine)
            if reached is not None:
                return reached
        from alembic import command

        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), revision)
        reached = current_revision(engine)
    finally:
        engine.dispose()
    if reached is None:
        raise RuntimeError("upgrade finished without a revision")
    return reached


def _head_without_alembic(engine: Engine) -> str | None:
    """The head, if `engine`'s database is at it already or is a new SQLite ledger given the
    head's schema here; None when Alembic must migrate it."""
    head = shipped_head()
    if recorded_revision(engine) == head:
        return head
    if engine.dialect.name != "sqlite":
        return None
    statements = head_sqlite_statements(head)
    if statements is None:
        return None
    writer = engine.execution_options(**{SQLITE_IMMEDIATE: True})
    with writer.begin() as connection:
        # Under the write lock: a ledger another process created meanwhile is not new.
        if connection.execute(text("SELECT count(*) FROM sqlite_master")).scalar_one():
            return None
        for statement in statements:
            connection.exec_driver_sql(statement)
    return head


def head_sqlite_statements(head: str, path: Path = HEAD_SQLITE) -> list[str] | None:
    """The statements of `path` if it holds the schema of revision `head`, else None."""
    try:
        lines = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    first, _, body = lines.partition("\n")
    if first != f"{_REVISION_LINE}{head}":
        return None
    return [statement for statement in body.split(_STATEMENT_END) if statement.strip()]


def sqlite_schema_text(database: Path) -> str:
    """`HEAD_SQLITE`'s text for the SQLite ledger at `database`, migrated from nothing by Alembic:
    its revision, then its schema objects' statements in the order SQLite recorded them (the
    tables SQLite makes itself left out) and its `alembic_version` row. Refuses a ledger with rows
    in any other table (the file holds no data but the revision)."""
    connection = sqlite3.connect(database)
    try:
        (revision,) = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        objects = connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
        ).fetchall()
        for name, _sql in objects:
            if name != "alembic_version" and _has_rows(connection, name):
                raise ValueError(f"{database}: table {name} has rows; not a new ledger")
    finally:
        connection.close()
    statements = [sql for name, sql in objects if not name.startswith("sqlite_")]
    row = f"INSERT INTO alembic_version (version_num) VALUES ('{revision}')"  # noqa: S608
    statements.append(row)
    return f"{_REVISION_LINE}{revision}\n" + "".join(f"{sql}{_STATEMENT_END}" for sql in statements)


def _has_rows(connection: sqlite3.Connection, name: str) -> bool:
    kind = connection.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    if kind is None or kind[0] != "table":
        return False
    return connection.execute(f'SELECT 1 FROM "{name}" LIMIT 1').fetchone() is not None  # noqa: S608


def write_head_sqlite(path: Path = HEAD_SQLITE) -> str:
    """Migrate a new SQLite ledger with Alembic and write its schema to `path` (`HEAD_SQLITE`);
    return the revision. Run after adding a migration: `python -m openbell.store.migrate`."""
    import tempfile

    from alembic import command

    with tempfile.TemporaryDirectory() as folder:
        database = Path(folder) / "head.db"
        engine = make_engine(f"sqlite:///{database.as_posix()}")
        try:
            with engine.begin() as connection:
                command.upgrade(alembic_config(connection), "head")
        finally:
            engine.dispose()
        schema = sqlite_schema_text(database)
    path.write_text(schema, encoding="utf-8")
    return schema.partition("\n")[0].removeprefix(_REVISION_LINE)


def downgrade(url: str, revision: str = "base") -> str | None:
    """Migrate the database at `url` down to `revision`; return the revision reached."""
    from alembic import command

    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), revision)
        return current_revision(engine)
    finally:
        engine.dispose()


if __name__ == "__main__":
    print(f"{HEAD_SQLITE}: revision {write_head_sqlite()}")
