"""news item key

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02

Makes the news cache idempotent: `item_key` (unique) is the SHA-256 of (symbol, published_at,
title), so putting an item again changes nothing; `item_source` keeps the item's own source (the
vendor or feed it names), apart from `source`, the data source that fetched it. Existing rows get
their key computed here (duplicates beyond the first are deleted) and an empty `item_source`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from openbell.store.types import UtcDateTime

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _item_key(symbol: str | None, published_at: datetime, title: str) -> str:
    # A frozen copy of `openbell.store.cache.news_key`: a migration must not change with the code.
    raw = json.dumps([symbol, published_at.astimezone(UTC).isoformat(), title])
    return hashlib.sha256(raw.encode()).hexdigest()


def _backfill() -> None:
    news = sa.table(
        "news",
        sa.column("id", sa.Integer()),
        sa.column("symbol", sa.String()),
        sa.column("published_at", UtcDateTime()),
        sa.column("title", sa.Text()),
        sa.column("item_key", sa.String()),
        sa.column("item_source", sa.String()),
    )
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(news.c.id, news.c.symbol, news.c.published_at, news.c.title).order_by(news.c.id)
    ).all()
    seen: set[str] = set()
    for row in rows:
        key = _item_key(row.symbol, row.published_at, row.title)
        if key in seen:
            connection.execute(sa.delete(news).where(news.c.id == row.id))
            continue
        seen.add(key)
        connection.execute(
            sa.update(news).where(news.c.id == row.id).values(item_key=key, item_source="")
        )


def upgrade() -> None:
    with op.batch_alter_table("news") as batch:
        batch.add_column(sa.Column("item_key", sa.String(), nullable=True))
        batch.add_column(sa.Column("item_source", sa.String(), nullable=True))
    _backfill()
    with op.batch_alter_table("news") as batch:
        batch.alter_column("item_key", existing_type=sa.String(), nullable=False)
        batch.alter_column("item_source", existing_type=sa.String(), nullable=False)
        batch.create_unique_constraint(op.f("uq_news_item_key"), ["item_key"])


def downgrade() -> None:
    with op.batch_alter_table("news") as batch:
        batch.drop_constraint(op.f("uq_news_item_key"), type_="unique")
        batch.drop_column("item_source")
        batch.drop_column("item_key")
