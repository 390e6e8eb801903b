"""bar coverage

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03

The spans of bar starts over which the bar cache holds every bar a source returned, final when
fetched, per (source, symbol, interval): what lets the cache be read back instead of asking the
vendor again. A new table; nothing existing changes, so it starts empty (the `bar` rows cached
before it carry no record of the windows asked, so they are not counted as covered).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import UtcDateTime

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "bar_coverage",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("interval", sa.String(), nullable=False),
        sa.Column("start_at", UtcDateTime(), nullable=False),
        sa.Column("end_at", UtcDateTime(), nullable=False),
        sa.Column("fetched_at", UtcDateTime(), nullable=False),
        sa.CheckConstraint("start_at < end_at", name=op.f("ck_bar_coverage_span")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bar_coverage")),
    )
    op.create_index(
        "ix_bar_coverage_source_symbol_interval",
        "bar_coverage",
        ["source", "symbol", "interval", "start_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_bar_coverage_source_symbol_interval", table_name="bar_coverage")
    op.drop_table("bar_coverage")
