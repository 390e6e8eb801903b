"""llm usage per cycle

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

The LLM agent's usage on each cycle: tokens in, out and cached (and whether they were estimated
because the provider reported none), model latency, cost (ExactDecimal) and the counts of parse
failures and invalid tool calls. All nullable: agents that use no model leave them empty.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import ExactDecimal

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INT_COLUMNS = (
    "tokens_in",
    "tokens_out",
    "tokens_cached",
    "llm_latency_ms",
    "parse_failures",
    "invalid_tool_calls",
)


def upgrade() -> None:
    with op.batch_alter_table("cycle") as batch:
        for name in _INT_COLUMNS[:3]:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=True))
        batch.add_column(sa.Column("usage_estimated", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("llm_latency_ms", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("cost", ExactDecimal(), nullable=True))
        for name in _INT_COLUMNS[4:]:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cycle") as batch:
        for name in (*_INT_COLUMNS, "usage_estimated", "cost"):
            batch.drop_column(name)
