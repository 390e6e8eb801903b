"""llm attempts per cycle

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06

The requests an LLM agent sent to its model in a cycle (`llm_attempts`) and how many of them got
no completion (`llm_failed_attempts`: HTTP 429 and 5xx, timeouts, bodies that are not a
completion, refusals), retried or not; each failed one is also an `attempt` trace row. Nullable,
like the other usage columns: agents that use no model leave them empty, and cycles recorded
before this revision read as zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("llm_attempts", "llm_failed_attempts")


def upgrade() -> None:
    with op.batch_alter_table("cycle") as batch:
        for name in _COLUMNS:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cycle") as batch:
        for name in _COLUMNS:
            batch.drop_column(name)
