"""strategy judgement

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03

FIDES' say-to-do verdicts and what the buy-and-hold comparison needs: the `strategy_judgement`
table (a judge model's four checks of a strategy's code against its rationale, with the judge's
rationale, its model and when; one per strategy and judge model), and `strategy_run.offered`, the
symbols a run was given (JSON; NULL for the runs stored before). Nothing else changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import UtcDateTime

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHECKS = ("direction", "indicators", "exits", "no_extra_rule")


def upgrade() -> None:
    op.create_table(
        "strategy_judgement",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("strategy_id", sa.Integer(), nullable=False),
        sa.Column("judge_model", sa.String(), nullable=False),
        sa.Column("judged_at", UtcDateTime(), nullable=False),
        *(sa.Column(check, sa.Integer(), nullable=False) for check in _CHECKS),
        sa.Column("rationale", sa.Text(), nullable=False),
        *(
            sa.CheckConstraint(f"{check} IN (0, 1)", name=op.f(f"ck_strategy_judgement_{check}"))
            for check in _CHECKS
        ),
        sa.ForeignKeyConstraint(
            ["strategy_id"],
            ["strategy_code.id"],
            name=op.f("fk_strategy_judgement_strategy_id_strategy_code"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_strategy_judgement")),
        sa.UniqueConstraint(
            "strategy_id",
            "judge_model",
            name=op.f("uq_strategy_judgement_strategy_id_judge_model"),
        ),
    )
    op.create_index(
        op.f("ix_strategy_judgement_strategy_id"),
        "strategy_judgement",
        ["strategy_id"],
        unique=False,
    )
    with op.batch_alter_table("strategy_run") as batch:
        batch.add_column(sa.Column("offered", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("strategy_run") as batch:
        batch.drop_column("offered")
    op.drop_index(op.f("ix_strategy_judgement_strategy_id"), table_name="strategy_judgement")
    op.drop_table("strategy_judgement")
