"""Migrations == models: a migrated database has exactly the schema of the SQLModel tables, and
the migrations run down to base and up again, on real SQLite and Postgres."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

import openbell.store.tables  # noqa: F401  (registers the tables)
from openbell.store.db import make_engine
from openbell.store.migrate import current_revision, downgrade, head_revision, upgrade
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
