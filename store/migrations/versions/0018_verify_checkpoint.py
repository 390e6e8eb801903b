"""verify checkpoint

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02

The `verify_checkpoint` table: where the daemon's last ledger verification of each account
stopped (the newest ids it read, the account's running totals there, when, and a checksum), from
which its start-up verification goes on with the rows written since. New table; nothing existing
changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import UtcDateTime

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "verify_checkpoint",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("verified_at", UtcDateTime(), nullable=False),
        sa.Column("watermarks", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("checksum", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_verify_checkpoint_account_id_account")
        ),
        sa.PrimaryKeyConstraint("account_id", name=op.f("pk_verify_checkpoint")),
    )


def downgrade() -> None:
    op.drop_table("verify_checkpoint")
