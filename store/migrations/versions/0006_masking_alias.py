"""masking keys and aliases

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05

Each masked account's key, stored so that its aliases and day labels never move (a restarted
daemon, a resumed replay, a universe file that gains a member or a later date) and so that reports
can unmask its traces: `masking_key` (the account's day epoch and money unit) and `masking_alias`
(symbol -> `asset_NNNN`, unique per account). New tables; nothing existing changes. An account
masked before this revision gets its key at its next masked cycle, derived from its seed as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import ExactDecimal

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "masking_key",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Date(), nullable=False),
        sa.Column("money_unit", ExactDecimal(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_masking_key_account_id_account")
        ),
        sa.PrimaryKeyConstraint("account_id", name=op.f("pk_masking_key")),
    )
    op.create_table(
        "masking_alias",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("alias", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["masking_key.account_id"],
            name=op.f("fk_masking_alias_account_id_masking_key"),
        ),
        sa.PrimaryKeyConstraint("account_id", "symbol", name=op.f("pk_masking_alias")),
        sa.UniqueConstraint("account_id", "alias", name=op.f("uq_masking_alias_account_id_alias")),
    )


def downgrade() -> None:
    op.drop_table("masking_alias")
    op.drop_table("masking_key")
