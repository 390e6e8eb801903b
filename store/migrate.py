"""Applying the Alembic migrations of `openbell.store.migrations`; `openbell db upgrade` calls this.

The Alembic configuration is built in code (no alembic.ini): the script location is the
migrations package directory and the connection is handed to `env.py` through
`Config.attributes`, so URLs with options (such as a Postgres `search_path`) need no escaping.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine

from openbell.store.db import make_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic `Config` for the store's migrations, bound to `connection` when given."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision this version of openbell ships."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIR}")
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None when it has never been migrated."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(url: str, revision: str = "head") -> str:
    """Migrate the database at `url` up to `revision` (default head); return the one reached."""
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), revision)
        reached = current_revision(engine)
    finally:
        engine.dispose()
    if reached is None:
        raise RuntimeError("upgrade finished without a revision")
    return reached


def downgrade(url: str, revision: str = "base") -> str | None:
    """Migrate the database at `url` down to `revision`; return the revision reached."""
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), revision)
        return current_revision(engine)
    finally:
        engine.dispose()
