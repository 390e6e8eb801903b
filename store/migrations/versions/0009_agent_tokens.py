"""agent tokens

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30

The `agent_token` table: the bearer tokens issued to agents that connect to the MCP server (kind
`mcp`), each stored only as the SHA-256 hex digest of the token (unique, so a token names one
agent), with when it was issued and revoked (an agent's current token has no `revoked_at`). New
table; nothing existing changes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from openbell.store.types import UtcDateTime

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agent_token",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(), nullable=False),
        sa.Column("issued_at", UtcDateTime(), nullable=False),
        sa.Column("revoked_at", UtcDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agent.id"], name=op.f("fk_agent_token_agent_id_agent")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_token")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_agent_token_token_hash")),
    )
    op.create_index(op.f("ix_agent_token_agent_id"), "agent_token", ["agent_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_agent_token_agent_id"), table_name="agent_token")
    op.drop_table("agent_token")
