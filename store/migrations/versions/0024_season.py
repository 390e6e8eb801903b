"""season

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-02

The `season` table: a named window of the ledger with the manifest fixed before its first slot
(canonical JSON and its SHA-256), the config text it was opened from and when it was opened and
closed (`openbell season open|close`). New table; nothing existing changes, so this revision can
be renumbered by editing its two ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import UtcDateTime

revision: str = "0024"
down_revision: str | Sequence[str] | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "season",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("manifest", sa.Text(), nullable=False),
        sa.Column("manifest_sha256", sa.String(), nullable=False),
        sa.Column("start_on", sa.Date(), nullable=False),
        sa.Column("end_on", sa.Date(), nullable=True),
        sa.Column("opened_at", UtcDateTime(), nullable=False),
        sa.Column("closed_at", UtcDateTime(), nullable=True),
        sa.Column("config", sa.Text(), nullable=False),
        sa.Column("config_path", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_season")),
        sa.UniqueConstraint("name", name=op.f("uq_season_name")),
    )


def downgrade() -> None:
    op.drop_table("season")
