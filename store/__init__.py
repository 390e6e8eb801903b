"""Store: the SQLModel tables, Alembic migrations and the exact paper ledger."""
