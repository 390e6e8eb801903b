"""The test kit's fast databases at head (`openbell_testkit.migrated`, behind the `engine` fixture)
are what Alembic's `upgrade` makes: the same catalog, the same revision, on SQLite and Postgres."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from openbell.store.db import make_engine
from openbell.store.migrate import current_revision, head_revision, upgrade
from openbell_testkit.migrated import migrate_to_head

Catalog = list[tuple[str, ...]]


def _table_sql(sql: object) -> str:
    """A `CREATE TABLE` with its constraints sorted: Alembic's batch migrations recreate a table
    with its constraints in an order that differs from one process to the next (two real upgrades
    differ there), while the columns keep theirs."""
    lines = [line.rstrip(", ") for line in str(sql).split("\n")]
    constraints = sorted(line for line in lines if line.strip().startswith("CONSTRAINT"))
    return "\n".join(
        [line for line in lines if not line.strip().startswith("CONSTRAINT")] + constraints
    )


def _sqlite_catalog(url: str) -> list[Catalog]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return [
                [
                    (*map(str, row[:-1]), _table_sql(row[-1]))
                    for row in connection.execute(text(sql)).all()
                ]
                for sql in (
                    "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name",
                    "SELECT version_num FROM alembic_version",
                    "PRAGMA user_version",
                    "PRAGMA journal_mode",
                )
            ]
    finally:
        engine.dispose()


#: The schema's own objects in Postgres's catalog, each query taking the schema's name.
PG_CATALOG = (
    (
        "SELECT table_name, column_name, data_type, is_nullable, column_default, ordinal_position "
        "FROM information_schema.columns WHERE table_schema = %(s)s ORDER BY 1, 2"
    ),
    "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %(s)s ORDER BY 1, 2",
    (
        "SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid) "
        "FROM pg_constraint WHERE connamespace = %(s)s::regnamespace ORDER BY 1, 2"
    ),
    (
        "SELECT table_name, view_definition FROM information_schema.views "
        "WHERE table_schema = %(s)s ORDER BY 1"
    ),
    (
        "SELECT sequence_name, data_type, start_value, increment FROM information_schema.sequences "
        "WHERE sequence_schema = %(s)s ORDER BY 1"
    ),
    (
        "SELECT tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = "
        "t.tgrelid WHERE c.relnamespace = %(s)s::regnamespace AND NOT tgisinternal ORDER BY 1"
    ),
    (
        "SELECT proname, pg_get_functiondef(oid) FROM pg_proc "
        "WHERE pronamespace = %(s)s::regnamespace ORDER BY 1"
    ),
    "SELECT version_num FROM alembic_version",
)


def _postgres_catalog(url: str) -> list[Catalog]:
    parsed = make_url(url)
    schema = str(parsed.query["application_name"])  # the schema's name (openbell_testkit.postgres)
    conninfo = make_conninfo(
        parsed.set(drivername="postgresql", query={}).render_as_string(False),
        **{key: str(value) for key, value in parsed.query.items()},
    )
    with psycopg.connect(conninfo) as connection:
        return [
            [
                tuple(str(value).replace(schema, "<schema>") for value in row)
                for row in connection.execute(sql, {"s": schema}).fetchall()  # type: ignore[arg-type]
            ]
            for sql in PG_CATALOG
        ]


def _catalog(url: str) -> list[Catalog]:
    return _sqlite_catalog(url) if url.startswith("sqlite") else _postgres_catalog(url)


def test_a_fast_database_at_head_is_the_one_upgrade_makes(
    db_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    fresh = (
        (lambda name: f"sqlite:///{tmp_path / name / 'openbell.db'}")
        if db_url.startswith("sqlite")
        else (lambda _name: request.getfixturevalue("pg_server").fresh_schema_url())
    )
    upgraded = db_url
    upgrade(upgraded)
    migrate_to_head(fresh("first"))  # this process's first: the real upgrade, recorded or kept
    copied = fresh("copied")
    migrate_to_head(copied)  # a copy (SQLite) or the recorded statements replayed (Postgres)
    expected = _catalog(upgraded)
    assert sum(len(rows) for rows in expected) > 50  # tables, columns and indexes, not nothing
    assert _catalog(copied) == expected


def test_the_engine_fixture_is_at_the_head_revision(engine: Engine) -> None:
    assert current_revision(engine) == head_revision()
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM account")).scalar_one() == 0
