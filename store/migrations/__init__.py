"""Alembic migrations of the openbell ledger; `openbell db upgrade` applies them."""
