"""shorting: short and cover sides, allow_short, borrow fees, margin calls

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01

Negative positions (issue 16, design §4): orders and fills may be `short` or `cover` as well as
`buy` and `sell` (the side check constraints widen; a downgrade narrows them again, refused by the
database while a short or cover row exists), and an account records whether it may short
(`account.allow_short`, false for every existing account). Positions need no change: a short is a
`position` row with a negative quantity and a non-negative cost (the proceeds still open).

Margin and borrow: the `borrow_fee` table (one row per account, short position and calendar day
held at that day's end: the negative quantity, the mark, the rate, the amount charged from cash
and when; `after_fill_id` places it among the account's fills, as for corporate actions) and the
`margin_call` table (one row per forced cover: account, cycle, the cover's order, when, the equity
and the maintenance requirement that called it, and the reason).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import ExactDecimal, UtcDateTime

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LONG_SIDES = "side IN ('buy', 'sell')"
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
    op.create_table(
        "borrow_fee",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("quantity", ExactDecimal(), nullable=False),
        sa.Column("price", ExactDecimal(), nullable=False),
        sa.Column("rate_bps", ExactDecimal(), nullable=False),
        sa.Column("day_count", sa.Integer(), nullable=False),
        sa.Column("amount", ExactDecimal(), nullable=False),
        sa.Column("currency", sa.String(), nullable=False),
        sa.Column("after_fill_id", sa.Integer(), nullable=True),
        sa.Column("charged_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_borrow_fee_account_id_account")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_borrow_fee")),
        sa.UniqueConstraint(
            "account_id", "symbol", "day", name=op.f("uq_borrow_fee_account_id_symbol_day")
        ),
    )
    op.create_table(
        "margin_call",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("cycle_id", sa.Integer(), nullable=False),
        sa.Column("order_id", sa.Integer(), nullable=False),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.Column("equity", ExactDecimal(), nullable=False),
        sa.Column("requirement", ExactDecimal(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_margin_call_account_id_account")
        ),
        sa.ForeignKeyConstraint(
            ["cycle_id"], ["cycle.id"], name=op.f("fk_margin_call_cycle_id_cycle")
        ),
        sa.ForeignKeyConstraint(
            ["order_id"], ["order.id"], name=op.f("fk_margin_call_order_id_order")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_margin_call")),
        sa.UniqueConstraint("order_id", name=op.f("uq_margin_call_order_id")),
    )
    op.create_index(op.f("ix_margin_call_account_id"), "margin_call", ["account_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_margin_call_account_id"), table_name="margin_call")
    op.drop_table("margin_call")
    op.drop_table("borrow_fee")
    _sides(_LONG_SIDES)
    op.execute("ALTER TABLE account DROP COLUMN allow_short")
