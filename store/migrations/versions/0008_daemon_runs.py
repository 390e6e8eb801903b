"""daemon runs

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04

The `daemon_run` table: one row per live daemon run and market it rings, with the run's start. A
market's earliest start is when a daemon first rang it on this ledger, from which `/healthz`
counts overdue slots. A ledger from before this table gets one row per market that has accounts,
started when its first account was opened (run `accounts`), so its health reads as it did.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import UtcDateTime

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "daemon_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("market", sa.String(), nullable=False),
        sa.Column("started_at", UtcDateTime(), nullable=False),
        sa.CheckConstraint("market IN ('us', 'cn', 'crypto')", name=op.f("ck_daemon_run_market")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_daemon_run")),
        sa.UniqueConstraint("run_id", "market", name=op.f("uq_daemon_run_run_id_market")),
    )
    op.execute(
        "INSERT INTO daemon_run (run_id, market, started_at) "
        "SELECT 'accounts', market, min(created_at) FROM account GROUP BY market"
    )


def downgrade() -> None:
    op.drop_table("daemon_run")
