"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29

The whole ledger schema: agents, accounts, cycles, orders, fills, positions, NAV snapshots with
their marks, traces, and the bar and news caches. Money and quantity columns are ExactDecimal
(TEXT on SQLite, NUMERIC on Postgres); datetimes are UtcDateTime.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import ExactDecimal, UtcDateTime

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agent",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent")),
        sa.UniqueConstraint("name", name=op.f("uq_agent_name")),
    )
    op.create_table(
        "bar",
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("interval", sa.String(), nullable=False),
        sa.Column("start_at", UtcDateTime(), nullable=False),
        sa.Column("end_at", UtcDateTime(), nullable=False),
        sa.Column("open", ExactDecimal(), nullable=False),
        sa.Column("high", ExactDecimal(), nullable=False),
        sa.Column("low", ExactDecimal(), nullable=False),
        sa.Column("close", ExactDecimal(), nullable=False),
        sa.Column("volume", ExactDecimal(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("fetched_at", UtcDateTime(), nullable=False),
        sa.Column("is_final", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("symbol", "interval", "start_at", name=op.f("pk_bar")),
    )
    op.create_table(
        "news",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=True),
        sa.Column("published_at", UtcDateTime(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("fetched_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_news")),
    )
    op.create_index("ix_news_symbol_published_at", "news", ["symbol", "published_at"], unique=False)
    op.create_table(
        "account",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("market", sa.String(), nullable=False),
        sa.Column("currency", sa.String(), nullable=False),
        sa.Column("initial_cash", ExactDecimal(), nullable=False),
        sa.Column("cash", ExactDecimal(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.CheckConstraint("market IN ('us', 'cn', 'crypto')", name=op.f("ck_account_market")),
        sa.ForeignKeyConstraint(["agent_id"], ["agent.id"], name=op.f("fk_account_agent_id_agent")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_account")),
        sa.UniqueConstraint("agent_id", "market", name=op.f("uq_account_agent_id_market")),
    )
    op.create_table(
        "cycle",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("slot_at", UtcDateTime(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("claimed_by", sa.String(), nullable=False),
        sa.Column("lease_until", UtcDateTime(), nullable=False),
        sa.Column("started_at", UtcDateTime(), nullable=False),
        sa.Column("finished_at", UtcDateTime(), nullable=True),
        sa.Column("error_class", sa.String(), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('claimed', 'done', 'failed', 'skipped', 'interrupted', 'missed')",
            name=op.f("ck_cycle_status"),
        ),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_cycle_account_id_account")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cycle")),
        sa.UniqueConstraint("account_id", "slot_at", name=op.f("uq_cycle_account_id_slot_at")),
    )
    op.create_table(
        "nav_snapshot",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("cash", ExactDecimal(), nullable=False),
        sa.Column("positions_value", ExactDecimal(), nullable=False),
        sa.Column("nav", ExactDecimal(), nullable=False),
        sa.Column("last_fill_id", sa.Integer(), nullable=True),
        sa.CheckConstraint("kind IN ('slot', 'close')", name=op.f("ck_nav_snapshot_kind")),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_nav_snapshot_account_id_account")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nav_snapshot")),
        sa.UniqueConstraint(
            "account_id", "at", "kind", name=op.f("uq_nav_snapshot_account_id_at_kind")
        ),
    )
    op.create_table(
        "position",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("quantity", ExactDecimal(), nullable=False),
        sa.Column("cost", ExactDecimal(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_position_account_id_account")
        ),
        sa.PrimaryKeyConstraint("account_id", "symbol", name=op.f("pk_position")),
    )
    op.create_table(
        "nav_mark",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("quantity", ExactDecimal(), nullable=False),
        sa.Column("price", ExactDecimal(), nullable=False),
        sa.Column("value", ExactDecimal(), nullable=False),
        sa.ForeignKeyConstraint(
            ["snapshot_id"], ["nav_snapshot.id"], name=op.f("fk_nav_mark_snapshot_id_nav_snapshot")
        ),
        sa.PrimaryKeyConstraint("snapshot_id", "symbol", name=op.f("pk_nav_mark")),
    )
    op.create_table(
        "order",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cycle_id", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("side", sa.String(), nullable=False),
        sa.Column("quantity", ExactDecimal(), nullable=False),
        sa.Column("target_weight", ExactDecimal(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("confidence", ExactDecimal(), nullable=True),
        sa.Column("placed_at", UtcDateTime(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("reject_reason", sa.String(), nullable=True),
        sa.Column("reject_message", sa.Text(), nullable=True),
        sa.Column("rejected_at", UtcDateTime(), nullable=True),
        sa.CheckConstraint(
            "(status = 'rejected') = (reject_reason IS NOT NULL)",
            name=op.f("ck_order_reject_reason"),
        ),
        sa.CheckConstraint("side IN ('buy', 'sell')", name=op.f("ck_order_side")),
        sa.CheckConstraint("status IN ('filled', 'rejected')", name=op.f("ck_order_status")),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_order_account_id_account")
        ),
        sa.ForeignKeyConstraint(["cycle_id"], ["cycle.id"], name=op.f("fk_order_cycle_id_cycle")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_order")),
        sa.UniqueConstraint("cycle_id", "seq", name=op.f("uq_order_cycle_id_seq")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_order_idempotency_key")),
    )
    op.create_index(op.f("ix_order_account_id"), "order", ["account_id"], unique=False)
    op.create_table(
        "trace",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cycle_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("tool", sa.String(), nullable=True),
        sa.Column("arguments", sa.Text(), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("tokens_in", sa.Integer(), nullable=True),
        sa.Column("tokens_out", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Integer(), nullable=True),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["cycle_id"], ["cycle.id"], name=op.f("fk_trace_cycle_id_cycle")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trace")),
        sa.UniqueConstraint("cycle_id", "seq", name=op.f("uq_trace_cycle_id_seq")),
    )
    op.create_table(
        "fill",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("order_id", sa.Integer(), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("side", sa.String(), nullable=False),
        sa.Column("quantity", ExactDecimal(), nullable=False),
        sa.Column("price", ExactDecimal(), nullable=False),
        sa.Column("notional", ExactDecimal(), nullable=False),
        sa.Column("fees", ExactDecimal(), nullable=False),
        sa.Column("currency", sa.String(), nullable=False),
        sa.Column("filled_at", UtcDateTime(), nullable=False),
        sa.Column("price_source", sa.String(), nullable=False),
        sa.CheckConstraint("side IN ('buy', 'sell')", name=op.f("ck_fill_side")),
        sa.ForeignKeyConstraint(
            ["account_id"], ["account.id"], name=op.f("fk_fill_account_id_account")
        ),
        sa.ForeignKeyConstraint(["order_id"], ["order.id"], name=op.f("fk_fill_order_id_order")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fill")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_fill_idempotency_key")),
    )
    op.create_index(
        "ix_fill_account_id_filled_at", "fill", ["account_id", "filled_at"], unique=False
    )
    op.create_index(op.f("ix_fill_order_id"), "fill", ["order_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_fill_order_id"), table_name="fill")
    op.drop_index("ix_fill_account_id_filled_at", table_name="fill")
    op.drop_table("fill")
    op.drop_table("trace")
    op.drop_index(op.f("ix_order_account_id"), table_name="order")
    op.drop_table("order")
    op.drop_table("nav_mark")
    op.drop_table("position")
    op.drop_table("nav_snapshot")
    op.drop_table("cycle")
    op.drop_table("account")
    op.drop_index("ix_news_symbol_published_at", table_name="news")
    op.drop_table("news")
    op.drop_table("bar")
    op.drop_table("agent")
