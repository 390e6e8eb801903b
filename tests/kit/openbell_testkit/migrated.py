"""Databases at the head revision for the tests' ledgers: Alembic once per process, then copies.

Running the migrations through Alembic costs about half a second a database on SQLite and a
second and a half on Postgres, and most tests only need an empty ledger at head (the `engine`
fixture, `live.migrated`). `migrate_to_head(url)` runs Alembic's real `upgrade` the first time a
process needs each kind of database, then makes the same database faster:

- SQLite: the first upgrade goes into a file of the process's own, which each later database
  copies (SQLite's backup API: the same pages, revision included).
- Postgres: the first upgrade (on the asking test's own schema) records every SQL statement that
  Alembic's engine sent, with its parameters, in order; a later schema gets the same statements
  replayed on one connection in one transaction (in a pipeline: one round trip), so the same
  tables, indexes, constraints, views and `alembic_version` row.

`tests/migration/test_migrated_copies.py` checks that both give what `upgrade` gives. The tests
of the migrations themselves call `openbell.store.migrate.upgrade`.
"""

from __future__ import annotations

import atexit
import shutil
import sqlite3
import tempfile
import threading
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from sqlalchemy import Engine, event
from sqlalchemy.engine import make_url

from openbell.store.migrate import upgrade


@dataclass(frozen=True)
class _Statement:
    sql: str
    parameters: Any
    many: bool


@dataclass
class _Heads:
    """What this process has migrated once: the SQLite file at head, Postgres's statements."""

    sqlite_file: Path | None = None
    postgres: list[_Statement] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


_HEADS = _Heads()


def migrate_to_head(url: str) -> None:
    """Make the empty database at `url` (SQLite, or a fresh Postgres schema) what
    `upgrade(url)` makes of it."""
    parsed = make_url(url)
    with _HEADS.lock:
        if parsed.get_backend_name() == "sqlite":
            _copy_sqlite(_sqlite_head(), Path(str(parsed.database)))
        elif _HEADS.postgres:
            _replay(url, _HEADS.postgres)
        else:
            _HEADS.postgres.extend(_recorded_upgrade(url))


def _sqlite_head() -> Path:
    if _HEADS.sqlite_file is None:
        directory = Path(tempfile.mkdtemp(prefix="openbell-head-"))
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        path = directory / "head.db"
        upgrade(f"sqlite:///{path}")
        _HEADS.sqlite_file = path
    return _HEADS.sqlite_file


def _copy_sqlite(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(source)) as head, closing(sqlite3.connect(target)) as copy:
        head.backup(copy)


def _recorded_upgrade(url: str) -> list[_Statement]:
    """Run `upgrade(url)`, recording what its engine sent (on this thread: `upgrade` runs in the
    caller's, while a daemon a test left running would use its own)."""
    recorded: list[_Statement] = []
    thread = threading.get_ident()

    def record(
        _connection: Any,
        _cursor: Any,
        statement: str,
        parameters: Any,
        _context: Any,
        executemany: bool,
    ) -> None:
        if threading.get_ident() == thread:
            recorded.append(_Statement(statement, parameters, executemany))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        upgrade(url)
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    if not any("alembic_version" in each.sql for each in recorded):
        raise RuntimeError("recorded no migration: the upgrade's statements were not seen")
    return recorded


def _replay(url: str, statements: list[_Statement]) -> None:
    parsed = make_url(url)  # the options (search_path) as keywords, as SQLAlchemy passes them
    conninfo = make_conninfo(
        parsed.set(drivername="postgresql", query={}).render_as_string(False),
        **{key: str(value) for key, value in parsed.query.items()},
    )
    # In a pipeline: the statements go out without waiting for each one's answer (one round trip
    # instead of a hundred; the same statements, in order, in one transaction).
    with psycopg.connect(conninfo) as connection:
        with connection.pipeline(), connection.cursor() as cursor:
            for each in statements:
                if each.many:
                    cursor.executemany(each.sql, each.parameters)
                else:
                    cursor.execute(each.sql, each.parameters)
        connection.commit()
