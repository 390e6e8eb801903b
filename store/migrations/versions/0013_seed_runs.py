"""seed runs

Revision ID: 0013
Revises: 0010
Create Date: 2026-11-30

The `seed_run` table: which agents are one seed's run of a group of repeated runs (`openbell
replay --seeds N`), with the group's label, the configured agent they repeat and the seed. New
table; nothing existing changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "seed_run",
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("group_label", sa.String(), nullable=False),
        sa.Column("base_agent", sa.String(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agent.id"], name=op.f("fk_seed_run_agent_id_agent")
        ),
        sa.PrimaryKeyConstraint("agent_id", name=op.f("pk_seed_run")),
    )


def downgrade() -> None:
    op.drop_table("seed_run")
