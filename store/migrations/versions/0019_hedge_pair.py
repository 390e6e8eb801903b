"""hedge pair

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03

The `hedge_pair` table: the pair a hedging agent (`mode = "hedge"`, Herculean's Hedging workflow)
picked among its candidates, one per account, in the order it gave (long-short is long the first,
short the second), with the cycle that picked it and when. New table; nothing existing changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import UtcDateTime

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "hedge_pair",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("first_symbol", sa.String(), nullable=False),
        sa.Column("second_symbol", sa.String(), nullable=False),
        sa.Column("cycle_id", sa.Integer(), nullable=False),
        sa.Column("picked_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_hedge_pair_account_id_account")
        ),
        sa.ForeignKeyConstraint(
            ["cycle_id"], ["cycle.id"], name=op.f("fk_hedge_pair_cycle_id_cycle")
        ),
        sa.PrimaryKeyConstraint("account_id", name=op.f("pk_hedge_pair")),
    )


def downgrade() -> None:
    op.drop_table("hedge_pair")
