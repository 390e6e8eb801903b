"""replay from cache

Revision ID: 0012
Revises: 0010
Create Date: 2026-12-01

What a cache replay needs to show its agents exactly what the live agents saw, and what a replay
warns about. `news.known_at`: the first decision time a news item was served for (rows cached
before it stay NULL and are shown from their publication time). `fundamentals_report`: the
fundamentals reports the live daemon served (or a user imported), with when each was known.
`quote_record`: the quotes a live source answered, per decision time. `replay_warning`: the
warnings a replay ran under, which `openbell report` repeats.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import ExactDecimal, UtcDateTime

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("news", sa.Column("known_at", UtcDateTime(), nullable=True))
    op.create_table(
        "fundamentals_report",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("period_end", sa.Date(), nullable=False),
        sa.Column("published_at", UtcDateTime(), nullable=False),
        sa.Column("known_at", UtcDateTime(), nullable=False),
        sa.Column("currency", sa.String(), nullable=False),
        sa.Column("figures", sa.Text(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("fetched_at", UtcDateTime(), nullable=False),
        sa.Column("item_key", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fundamentals_report")),
        sa.UniqueConstraint("item_key", name=op.f("uq_fundamentals_report_item_key")),
    )
    op.create_index(
        "ix_fundamentals_report_symbol_published_at",
        "fundamentals_report",
        ["symbol", "published_at"],
        unique=False,
    )
    op.create_table(
        "quote_record",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("asked_at", UtcDateTime(), nullable=False),
        sa.Column("quoted_at", UtcDateTime(), nullable=False),
        sa.Column("price", ExactDecimal(), nullable=False),
        sa.Column("fetched_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quote_record")),
        sa.UniqueConstraint(
            "source", "symbol", "asked_at", name=op.f("uq_quote_record_source_symbol_asked_at")
        ),
    )
    op.create_index(
        "ix_quote_record_symbol_asked_at", "quote_record", ["symbol", "asked_at"], unique=False
    )
    op.create_table(
        "replay_warning",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("market", sa.String(), nullable=False),
        sa.Column("start_at", UtcDateTime(), nullable=False),
        sa.Column("end_at", UtcDateTime(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "market IN ('us', 'cn', 'crypto')", name=op.f("ck_replay_warning_market")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_replay_warning")),
    )


def downgrade() -> None:
    op.drop_table("replay_warning")
    op.drop_index("ix_quote_record_symbol_asked_at", table_name="quote_record")
    op.drop_table("quote_record")
    op.drop_index("ix_fundamentals_report_symbol_published_at", table_name="fundamentals_report")
    op.drop_table("fundamentals_report")
    with op.batch_alter_table("news") as batch:
        batch.drop_column("known_at")
