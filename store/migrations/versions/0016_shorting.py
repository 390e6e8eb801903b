"""shorting

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01

Negative positions (issue 16): orders and fills may be `short` or `cover` as well as `buy` and
`sell` (the side check constraints widen), and an account records whether it may short
(`account.allow_short`, false for every existing account). Positions need no change: a short is a
`position` row with a negative quantity and a non-negative cost (the proceeds still open).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LONG_ONLY = "side IN ('buy', 'sell')"
_SIDES = "side IN ('buy', 'sell', 'short', 'cover')"


def _sides(check: str) -> None:
    for table in ("order", "fill"):
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(op.f(f"ck_{table}_side"), type_="check")
            batch.create_check_constraint(op.f(f"ck_{table}_side"), check)


def upgrade() -> None:
    # Plain ALTER TABLE (no batch copy): SQLite cannot recreate `account` under the leaderboard
    # views that read it.
    op.add_column(
        "account",
        sa.Column("allow_short", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    _sides(_SIDES)


def downgrade() -> None:
    _sides(_LONG_ONLY)
    op.execute("ALTER TABLE account DROP COLUMN allow_short")
