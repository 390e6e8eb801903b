"""bar known_at: when a cached final bar's values were first known

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02

A cache replay shows a bar from when the live daemon first had it final, not from its end (a bar
the vendor delivered late stays hidden until it was fetched, as it was live), so a final bar keeps
the first decision time it was fetched final for (`bar.known_at`; NULL for an unfinished bar).
`fetched_at` stays its last fetch. A final bar cached before this revision gets its last fetch
time: no earlier time is known, and a later one never shows a bar before it was fetched.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import UtcDateTime

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("bar", sa.Column("known_at", UtcDateTime(), nullable=True))
    op.execute("UPDATE bar SET known_at = fetched_at WHERE is_final")


def downgrade() -> None:
    with op.batch_alter_table("bar") as batch:
        batch.drop_column("known_at")
