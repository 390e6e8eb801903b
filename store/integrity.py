"""The ledger database's own integrity: its file, and the indexes and constraints it relies on.

`check_integrity` raises `DatabaseDamaged` naming what is damaged (the first problem, and how many
more) or returns quietly:
- SQLite: `PRAGMA quick_check` (pages, cells, record formats, NOT NULL and CHECK constraints), or
  with `thorough` `PRAGMA integrity_check`, which also reads every index against its table (a
  scrambled `UNIQUE(account_id, slot_at)` index of `cycle` shows only there);
- both engines: every primary key and unique constraint of the schema (`core_tables.py`: the cycle
  claim's `UNIQUE(account_id, slot_at)`, the orders' and fills' idempotency keys, ...) has a
  unique index on its columns, and on Postgres every index of the schema's tables is valid and
  ready (`pg_index.indisvalid`, `indisready`: a `CREATE UNIQUE INDEX CONCURRENTLY` that failed
  leaves an invalid one, which enforces nothing);
- Postgres with `thorough`, where the `amcheck` extension is installed: `bt_index_check` of each
  of those B-tree indexes.
Each one-shot command runs the quick check when it opens a SQLite ledger, the daemon at start-up,
and `ledger verify` the thorough one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlalchemy import Connection, Engine, Table, text
from sqlalchemy.exc import DBAPIError

from openbell.markets.errors import DatabaseDamaged
from openbell.store.core_tables import METADATA

#: How many of SQLite's problem lines a check reads (it stops there).
MAX_PROBLEMS = 20


def check_integrity(engine: Engine, *, thorough: bool = False, schema: bool = True) -> None:
    """Raise `DatabaseDamaged` if the database behind `engine` is damaged (see the module).

    `schema` False checks the file alone (SQLite's pages), not the schema's unique indexes: for a
    database that may be at an older revision and is about to be migrated (`run`, `replay`)."""
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "sqlite":
                problems = _sqlite_problems(connection, thorough=thorough, schema=schema)
            else:
                problems = _postgres_problems(connection, thorough=thorough)
    except DBAPIError as exc:
        raise DatabaseDamaged(f"damaged: {_first_line(exc)}") from exc
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise DatabaseDamaged(f"damaged: {problems[0]}{more}")


def foreign_tables(engine: Engine) -> list[str]:
    """The tables of a SQLite database that holds no openbell schema (no `alembic_version`):
    someone else's database, which a command must not migrate into; empty for a ledger, or for a
    database with no table at all."""
    with engine.connect() as connection:
        names = _sqlite_table_names(connection)
    return [] if "alembic_version" in names else sorted(names)


def _sqlite_problems(connection: Connection, *, thorough: bool, schema: bool) -> list[str]:
    pragma = "integrity_check" if thorough else "quick_check"
    try:
        rows = list(connection.exec_driver_sql(f"PRAGMA {pragma}({MAX_PROBLEMS})").scalars())
    except DBAPIError as exc:  # SQLite gave up on the whole file: find the tables it cannot read
        broken = []
        for name in _sqlite_table_names(connection):
            try:
                connection.exec_driver_sql(f"PRAGMA {pragma}({_quoted(name)})").all()
            except DBAPIError:
                broken.append(name)
        where = f" in table {', '.join(broken)}" if broken else ""
        return [f"{pragma}: {_first_line(exc)}{where}"]
    lines = [line for row in rows for line in str(row).splitlines()]
    lines = [line for line in lines if line != "ok" and not line.startswith("*** in ")]
    if lines:
        return [f"{pragma}: {_named_pages(connection, line)}" for line in lines]
    return _missing_uniques(_sqlite_uniques(connection)) if schema else []


def _named_pages(connection: Connection, line: str) -> str:
    """`line` with a page SQLite names that is a table's or an index's root page named too."""
    found = re.match(r"(?:On tree page|Page) (\d+)", line)
    if found is None:
        return line
    roots = connection.exec_driver_sql(
        "SELECT type, name, tbl_name FROM sqlite_master WHERE rootpage = ?", (int(found[1]),)
    ).first()
    if roots is None:
        return line
    kind, name, table = roots
    owner = f"table {name}" if kind == "table" else f"index {name} of table {table}"
    return f"{line} ({owner})"


def _sqlite_table_names(connection: Connection) -> list[str]:
    return list(
        connection.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).scalars()
    )


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _first_line(exc: DBAPIError) -> str:
    cause = exc.orig if exc.orig is not None else exc
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0]


def _schema_tables() -> list[Table]:
    return [table for name, table in sorted(METADATA.tables.items()) if name]


def _expected_uniques(table: Table) -> set[tuple[str, ...]]:
    """The column sets `table` must hold unique: its primary key, its unique constraints, its
    unique columns and unique indexes."""
    from sqlalchemy import UniqueConstraint

    found = {tuple(sorted(column.name for column in table.primary_key.columns))}
    for constraint in table.constraints:
        if isinstance(constraint, UniqueConstraint):
            found.add(tuple(sorted(column.name for column in constraint.columns)))
    found.update((column.name,) for column in table.columns if column.unique)
    for index in table.indexes:
        if index.unique:
            found.add(tuple(sorted(column.name for column in index.columns)))
    found.discard(())
    return found


def _missing_uniques(actual: dict[str, set[tuple[str, ...]]]) -> list[str]:
    problems = []
    for table in _schema_tables():
        present = actual.get(table.name)
        if present is None:
            problems.append(f"table {table.name} is missing")
            continue
        for columns in sorted(_expected_uniques(table) - present):
            problems.append(
                f"table {table.name} has no unique index on ({', '.join(columns)}): "
                "the uniqueness it relies on is not enforced"
            )
    return problems


def _sqlite_uniques(connection: Connection) -> dict[str, set[tuple[str, ...]]]:
    """Each table's unique column sets as SQLite enforces them (unique indexes, and the primary
    key, which for one INTEGER column is the rowid itself)."""
    found: dict[str, set[tuple[str, ...]]] = {}
    for name in _sqlite_table_names(connection):
        quoted = _quoted(name)
        columns = connection.exec_driver_sql(f"PRAGMA table_info({quoted})").all()
        key = tuple(sorted(row[1] for row in columns if row[5]))
        uniques = {key} if key else set()
        for index in connection.exec_driver_sql(f"PRAGMA index_list({quoted})").all():
            if index[2]:
                info = connection.exec_driver_sql(f"PRAGMA index_info({_quoted(index[1])})").all()
                uniques.add(tuple(sorted(str(row[2]) for row in info)))
        found[name] = uniques
    return found


_PG_INDEXES = text(
    """
    SELECT c.relname, i.relname, x.indisunique, x.indisvalid, x.indisready, am.amname,
           x.indexrelid,
           ARRAY(SELECT a.attname FROM unnest(x.indkey) AS k(attnum)
                 JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum)
    FROM pg_index x
    JOIN pg_class c ON c.oid = x.indrelid
    JOIN pg_class i ON i.oid = x.indexrelid
    JOIN pg_am am ON am.oid = i.relam
    WHERE c.oid = to_regclass(:table)
    """
)


def _postgres_problems(connection: Connection, *, thorough: bool) -> list[str]:
    problems: list[str] = []
    actual: dict[str, set[tuple[str, ...]]] = {}
    btrees: list[tuple[str, int]] = []
    for table in _schema_tables():
        quoted = _quoted(table.name)
        exists = connection.execute(text("SELECT to_regclass(:table)"), {"table": quoted})
        if exists.scalar() is None:
            continue  # reported as missing below
        uniques: set[tuple[str, ...]] = set()
        for row in connection.execute(_PG_INDEXES, {"table": quoted}):
            table_name, index, unique, valid, ready, method, oid, columns = row
            if not (valid and ready):
                problems.append(
                    f"index {index} of table {table_name} is not valid (pg_index.indisvalid): "
                    "it enforces and finds nothing; drop it and create it again"
                )
                continue
            if unique:
                uniques.add(tuple(sorted(columns)))
            if method == "btree":
                btrees.append((index, oid))
        actual[table.name] = uniques
    problems.extend(_missing_uniques(actual))
    if thorough and not problems:
        problems.extend(_amcheck(connection, btrees))
    return problems


def _amcheck(connection: Connection, indexes: Iterable[tuple[str, int]]) -> list[str]:
    """`bt_index_check` of each index, where the `amcheck` extension is installed."""
    installed = connection.execute(
        text("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'")
    ).first()
    if installed is None:
        return []
    problems = []
    for name, oid in indexes:
        try:
            with connection.begin_nested():
                connection.execute(text("SELECT bt_index_check(:oid)"), {"oid": oid})
        except DBAPIError as exc:
            problems.append(f"amcheck: index {name}: {_first_line(exc)}")
    return problems
