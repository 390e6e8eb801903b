"""strategy code

Revision ID: 0015
Revises: 0010
Create Date: 2026-12-01

The `strategy_code` table (a strategy-code agent's strategy: its code, claimed edge and rationale)
and the `strategy_run` table (each run of it at a cycle: when, how long, outcome, weights or error;
one per cycle). New tables; nothing existing changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import ExactDecimal, UtcDateTime

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "strategy_code",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("cycle_id", sa.Integer(), nullable=False),
        sa.Column("written_at", UtcDateTime(), nullable=False),
        sa.Column("code", sa.Text(), nullable=False),
        sa.Column("claimed_return", ExactDecimal(), nullable=True),
        sa.Column("claimed_hit_rate", ExactDecimal(), nullable=True),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column("answers", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_strategy_code_account_id_account")
        ),
        sa.ForeignKeyConstraint(
            ["cycle_id"], ["cycle.id"], name=op.f("fk_strategy_code_cycle_id_cycle")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_strategy_code")),
    )
    op.create_index(
        op.f("ix_strategy_code_account_id"), "strategy_code", ["account_id"], unique=False
    )
    op.create_table(
        "strategy_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("strategy_id", sa.Integer(), nullable=False),
        sa.Column("cycle_id", sa.Integer(), nullable=False),
        sa.Column("ran_at", UtcDateTime(), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("weights", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "outcome IN ('ok', 'error', 'invalid', 'timeout', 'killed')",
            name=op.f("ck_strategy_run_outcome"),
        ),
        sa.ForeignKeyConstraint(
            ["cycle_id"], ["cycle.id"], name=op.f("fk_strategy_run_cycle_id_cycle")
        ),
        sa.ForeignKeyConstraint(
            ["strategy_id"],
            ["strategy_code.id"],
            name=op.f("fk_strategy_run_strategy_id_strategy_code"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_strategy_run")),
        sa.UniqueConstraint("cycle_id", name=op.f("uq_strategy_run_cycle_id")),
    )
    op.create_index(
        op.f("ix_strategy_run_strategy_id"), "strategy_run", ["strategy_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_strategy_run_strategy_id"), table_name="strategy_run")
    op.drop_table("strategy_run")
    op.drop_index(op.f("ix_strategy_code_account_id"), table_name="strategy_code")
    op.drop_table("strategy_code")
