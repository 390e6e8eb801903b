"""cycle digest

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-02

The `cycle_digest` table: each account's hash chain, one link per finished or missed cycle (the
digest of the cycle's record chained to the account's previous link), so that an exported
season's record can be checked by anyone (`openbell season verify`). Cycles finished before this
revision have no link: their accounts' chains start at the first cycle finished after it. New
table; nothing existing changes, so this revision can be renumbered by editing its two ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | Sequence[str] | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cycle_digest",
        sa.Column("cycle_id", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("prev", sa.String(), nullable=False),
        sa.Column("digest", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_cycle_digest_account_id_account")
        ),
        sa.PrimaryKeyConstraint("cycle_id", name=op.f("pk_cycle_digest")),
        sa.UniqueConstraint("account_id", "seq", name=op.f("uq_cycle_digest_account_id_seq")),
    )


def downgrade() -> None:
    op.drop_table("cycle_digest")
