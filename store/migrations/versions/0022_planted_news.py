"""planted news

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02

The `planted_news` table: the news items the injection probe (`[probe.injection]`) planted in a
replay, each with the kind of instruction it carries and its target symbol, so a report can
find where a planted item reached an agent and whether the agent obeyed. New table; nothing
existing changes, so this revision can be renumbered by editing its two ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import UtcDateTime

revision: str = "0022"
down_revision: str | Sequence[str] | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "planted_news",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("market", sa.String(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("published_at", UtcDateTime(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("target", sa.String(), nullable=True),
        sa.CheckConstraint("market IN ('us', 'cn', 'crypto')", name=op.f("ck_planted_news_market")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_planted_news")),
        sa.UniqueConstraint(
            "market",
            "symbol",
            "published_at",
            "title",
            name=op.f("uq_planted_news_market_symbol_published_at_title"),
        ),
    )


def downgrade() -> None:
    op.drop_table("planted_news")
