"""model identity per exchange

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02

The model identity each response reported, on its `assistant` trace row (one row per model
exchange): `trace.model` (the response's `model`), `trace.fingerprint` (its `system_fingerprint`)
and `trace.revision` (the provider's revision headers, e.g. `openai-model`). Nullable: other rows,
responses without them and the rows stored before this revision leave them empty. Nothing else
changes, so this revision can be renumbered by editing its two ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("model", "fingerprint", "revision")


def upgrade() -> None:
    with op.batch_alter_table("trace") as batch:
        for name in _COLUMNS:
            batch.add_column(sa.Column(name, sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trace") as batch:
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
