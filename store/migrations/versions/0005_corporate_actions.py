"""corporate actions

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04

Splits and cash dividends applied to accounts become ledger entries (`corporate_action`, one row
per account and action), and each NAV snapshot records the newest entry it includes
(`nav_snapshot.last_action_id`) as it does the newest fill. Both are new: existing snapshots get
NULL (they include no corporate action), so an existing ledger verifies as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import ExactDecimal, UtcDateTime

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "corporate_action",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("ex_date", sa.Date(), nullable=False),
        sa.Column("ex_at", UtcDateTime(), nullable=False),
        sa.Column("ratio", ExactDecimal(), nullable=False),
        sa.Column("cash_per_share", ExactDecimal(), nullable=False),
        sa.Column("currency", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("quantity_before", ExactDecimal(), nullable=False),
        sa.Column("quantity_delta", ExactDecimal(), nullable=False),
        sa.Column("fraction", ExactDecimal(), nullable=False),
        sa.Column("price", ExactDecimal(), nullable=True),
        sa.Column("cash_delta", ExactDecimal(), nullable=False),
        sa.Column("cost_delta", ExactDecimal(), nullable=False),
        sa.Column("after_fill_id", sa.Integer(), nullable=True),
        sa.Column("applied_at", UtcDateTime(), nullable=False),
        sa.CheckConstraint(
            "kind IN ('cash_dividend', 'split')", name=op.f("ck_corporate_action_kind")
        ),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_corporate_action_account_id_account")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_corporate_action")),
        sa.UniqueConstraint(
            "account_id",
            "symbol",
            "kind",
            "ex_date",
            name=op.f("uq_corporate_action_account_id_symbol_kind_ex_date"),
        ),
    )
    with op.batch_alter_table("nav_snapshot") as batch:
        batch.add_column(sa.Column("last_action_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nav_snapshot") as batch:
        batch.drop_column("last_action_id")
    op.drop_table("corporate_action")
