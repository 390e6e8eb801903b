"""Migrations == models: a migrated database has exactly the schema of the SQLModel tables (and of
the Core tables, `store/core_tables.py`), and
the migrations run down to base and up again, on real SQLite and Postgres."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlmodel import SQLModel

import openbell.store.tables  # noqa: F401  (registers the tables)
from openbell.markets.errors import SchemaError
from openbell.store.core_tables import METADATA
from openbell.store.db import check_schema, make_engine, recorded_revision, shipped_head
from openbell.store.migrate import (
    alembic_config,
    current_revision,
    downgrade,
    head_revision,
    upgrade,
)
from openbell.store.types import ExactDecimal


def _differences(url: str, metadata: sa.MetaData) -> list[Any]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


@pytest.fixture
def migrated_url(db_url: str) -> str:
    assert upgrade(db_url) == head_revision()
    return db_url


def test_upgraded_schema_matches_the_models(migrated_url: str) -> None:
    assert _differences(migrated_url, SQLModel.metadata) == []


def test_upgraded_schema_matches_the_core_tables(migrated_url: str) -> None:
    assert _differences(migrated_url, METADATA) == []


def test_the_comparison_sees_a_changed_column_type(migrated_url: str) -> None:
    """Guard against a comparison that passes by comparing nothing."""
    changed = sa.MetaData()
    for table in SQLModel.metadata.sorted_tables:
        table.to_metadata(changed)
    changed.tables["fill"].c.price.type = sa.Integer()
    changed.tables["account"].c.market.type = ExactDecimal()
    # Each difference is [(kind, schema, table, column, ...)].
    found = {(d[0][0], d[0][2], d[0][3]) for d in _differences(migrated_url, changed)}
    assert found == {("modify_type", "fill", "price"), ("modify_type", "account", "market")}


def test_downgrade_to_base_and_upgrade_again(migrated_url: str) -> None:
    assert downgrade(migrated_url, "base") is None
    engine = make_engine(migrated_url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
        assert tables <= {"alembic_version"}
        assert current_revision(engine) is None
    finally:
        engine.dispose()
    assert upgrade(migrated_url) == head_revision()
    assert _differences(migrated_url, SQLModel.metadata) == []


def test_the_schema_check_reads_revisions_as_alembic_does(db_url: str) -> None:
    """`check_schema` reads the head and the database's revision without Alembic: at every
    revision from none to head it must see what Alembic sees, and refuse all but the head."""
    assert shipped_head() == head_revision()
    engine = make_engine(db_url)
    try:
        script = ScriptDirectory.from_config(alembic_config())
        chain = [found.revision for found in script.walk_revisions()]  # head first
        revisions = [None, *reversed(chain)]
        for revision in revisions:
            if revision is not None:
                assert upgrade(db_url, revision) == revision
            assert recorded_revision(engine) == current_revision(engine) == revision
            if revision == head_revision():
                assert check_schema(engine) == revision
            else:
                state = "has no openbell schema" if revision is None else f"revision {revision},"
                with pytest.raises(SchemaError, match=state):
                    check_schema(engine)
    finally:
        engine.dispose()


def test_the_shipped_head_is_the_revision_nothing_revises(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text('revision = "0001"\ndown_revision = None\n')
    (tmp_path / "b.py").write_text('revision: str = "0002"\ndown_revision: str | None = "0001"\n')
    assert shipped_head(tmp_path) == "0002"
    (tmp_path / "c.py").write_text('revision = "0003"\ndown_revision = ("0001",)\n')
    with pytest.raises(RuntimeError, match=r"expected one head, found \['0002', '0003'\]"):
        shipped_head(tmp_path)


def test_the_shipped_head_is_read_again_when_a_migration_changes(tmp_path: Path) -> None:
    """It is read once per state of the folder (a replay asks twice): an edited file, again."""
    (tmp_path / "a.py").write_text('revision = "0001"\ndown_revision = None\n')
    (tmp_path / "b.py").write_text('revision = "0002"\ndown_revision = "0001"\n')
    assert shipped_head(tmp_path) == shipped_head(tmp_path) == "0002"
    (tmp_path / "b.py").write_text('revision = "0002b"\ndown_revision = "0001"\n')
    assert shipped_head(tmp_path) == "0002b"


def test_the_revisions_are_read_from_the_header_or_else_the_whole_file(tmp_path: Path) -> None:
    """`shipped_head` parses a migration's header, up to its first function, when both revisions
    are there; one assigned further down, or a header that is not Python on its own (a docstring
    with a line that starts like a function), is read from the whole file, as before."""
    (tmp_path / "a.py").write_text(
        '"""first\n\ndef in a docstring\n"""\nrevision = "0001"\ndown_revision = None\n\n\n'
        "def upgrade() -> None:\n    pass\n"
    )
    (tmp_path / "b.py").write_text(
        'revision = "0002"\n\n\ndef upgrade() -> None:\n    pass\n\n\ndown_revision = "0001"\n'
    )
    (tmp_path / "c.py").write_text(
        'revision = "0003"\ndown_revision = ("0002",)\n\n\n@decorated\ndef upgrade():\n    pass\n'
    )
    assert shipped_head(tmp_path) == "0003"
    (tmp_path / "c.py").write_text('revision = "0003"\n\n\nclass Later:\n    pass\n')
    with pytest.raises(RuntimeError, match=r"expected one head, found \['0002', '0003'\]"):
        shipped_head(tmp_path)
