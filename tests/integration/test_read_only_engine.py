"""A read-only engine (`openbell serve`) reads the ledger and cannot write it, on SQLite and
Postgres."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from openbell.markets.errors import ConfigError
from openbell.store.db import check_schema, make_engine
from openbell.store.migrate import upgrade

INSERT = "INSERT INTO agent (name, kind, created_at) VALUES ('intruder', 'cash', '2026-01-01')"


def test_a_read_only_engine_reads_but_cannot_write(db_url: str) -> None:
    head = upgrade(db_url)
    engine = make_engine(db_url, read_only=True)
    try:
        assert check_schema(engine) == head
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM agent")).scalar_one() == 0
        with pytest.raises(DBAPIError, match=r"(?i)read.?only"), engine.begin() as connection:
            connection.execute(text(INSERT))
    finally:
        engine.dispose()
    writable = make_engine(db_url)
    try:
        with writable.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM agent")).scalar_one() == 0
    finally:
        writable.dispose()


def test_a_read_only_sqlite_ledger_is_a_file_that_exists(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    missing = tmp_path_factory.mktemp("ro") / "missing.db"
    engine = make_engine(f"sqlite:///{missing}", read_only=True)
    try:
        with pytest.raises(DBAPIError, match="unable to open database file"):
            engine.connect().close()
    finally:
        engine.dispose()
    assert not missing.exists()
    with pytest.raises(ConfigError, match="a read-only ledger is a file"):
        make_engine("sqlite://", read_only=True)
