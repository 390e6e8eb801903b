"""recorded model answers

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02

Every model exchange kept, so that `openbell replay --answers` re-runs an LLM agent with no
endpoint: on the exchange's `assistant` trace row, `trace.request_digest` (the sha256 of the
request body as sent, `agents/llm/answers.py`) and `trace.response` (the response body as
received, whole). Nullable: other rows and the rows stored before this revision leave them empty.
Nothing else changes, so this revision can be renumbered by editing its two ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | Sequence[str] | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("trace") as batch:
        batch.add_column(sa.Column("request_digest", sa.String(), nullable=True))
        batch.add_column(sa.Column("response", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trace") as batch:
        batch.drop_column("response")
        batch.drop_column("request_digest")
