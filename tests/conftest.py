"""Database fixtures: a real SQLite file per test and a fresh Postgres schema per test.

Postgres comes from `OPENBELL_TEST_PG` (default `postgresql+psycopg://postgres@127.0.0.1:5432/test`).
Each test session works under its own schema prefix (`openbell_test_<hex>`); each test gets a
fresh schema (`<prefix>_<n>`) reached through `options=-csearch_path=...` in the URL, so Alembic's
`alembic_version` table and every ledger table live inside it. The URL also sets `application_name`
to the schema's name, so a fault test tells its own connections from those of other runs sharing
the server (`pg_faults.terminate_connections` kills only its own). All of the session's schemas are
dropped (CASCADE) at the end. Without a reachable server, Postgres tests skip with a message saying
how to enable them, unless `OPENBELL_REQUIRE_PG=1`, which makes them fail instead.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade

PG_DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@dataclass
class PgServer:
    """A reachable Postgres database and the schemas this test session created in it."""

    url: str
    prefix: str
    schemas: list[str] = field(default_factory=list)
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def conninfo(self) -> str:
        return make_url(self.url).set(drivername="postgresql").render_as_string(False)

    def fresh_schema_url(self) -> str:
        """Create an empty schema and return a URL whose search_path points at it."""
        schema = f"{self.prefix}_{next(self._counter)}"
        with psycopg.connect(self.conninfo, autocommit=True) as connection:
            connection.execute(f'CREATE SCHEMA "{schema}"')
        self.schemas.append(schema)
        url = make_url(self.url).set(drivername="postgresql+psycopg")
        query = {"options": f"-csearch_path={schema}", "application_name": schema}
        return url.update_query_dict(query).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The test Postgres server, or a skip (a failure with OPENBELL_REQUIRE_PG=1) without one."""
    url = os.environ.get("OPENBELL_TEST_PG", PG_DEFAULT_URL)
    server = PgServer(url=url, prefix=f"openbell_test_{uuid.uuid4().hex[:10]}")
    try:
        with psycopg.connect(server.conninfo, connect_timeout=3) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as exc:
        message = (
            f"Postgres unreachable at {make_url(url).render_as_string()} ({exc}); start Postgres "
            "or set OPENBELL_TEST_PG=postgresql+psycopg://USER@HOST:PORT/DB to run these tests"
        )
        if os.environ.get("OPENBELL_REQUIRE_PG") == "1":
            pytest.fail(f"OPENBELL_REQUIRE_PG=1 but {message}")
        pytest.skip(message)
    yield server
    with psycopg.connect(server.conninfo, autocommit=True) as connection:
        for schema in server.schemas:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A URL for a real SQLite file (in a directory that does not exist yet)."""
    return f"sqlite:///{tmp_path / 'state' / 'openbell.db'}"


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A URL for a fresh, empty Postgres schema."""
    return pg_server.fresh_schema_url()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """An empty database, once on SQLite and once on Postgres."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine on a database migrated to head."""
    upgrade(db_url)
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    """The ledger on a migrated database."""
    return Ledger(engine)
