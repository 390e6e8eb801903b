"""Database fixtures: a real SQLite file per test and a fresh Postgres schema per test.

Postgres comes from `OPENBELL_TEST_PG` (default `postgresql+psycopg://postgres@127.0.0.1:5432/test`).
Each test session (each pytest-xdist worker: `make pytest` runs several) works under its own
schema prefix (`openbell_test_<hex>`); each test gets a fresh schema (`<prefix>_<n>`) reached
through `options=-csearch_path=...` in the URL, so Alembic's `alembic_version` table and every
ledger table live inside it; the options also turn off `synchronous_commit` (a commit does not wait
for the disk: what connections see is unchanged, only a server crash could lose the last commits).
The URL also sets `application_name` to the schema's name, so a fault test tells its own
connections from those of other runs sharing the server
(`openbell_testkit.postgres.terminate_connections` kills only its own). A test's schema is dropped
(CASCADE) after it, in the background, and any the session still has at its end. Without a
reachable server, Postgres tests skip with a message saying how to enable them, unless
`OPENBELL_REQUIRE_PG=1`, which makes them fail instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell_testkit.migrated import migrate_to_head
from openbell_testkit.postgres import PG_DEFAULT_URL, PgServer
from openbell_testkit.zygote import FRESH


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
    server.drop_all()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A URL for a real SQLite file (in a directory that does not exist yet)."""
    return f"sqlite:///{tmp_path / 'state' / 'openbell.db'}"


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A URL for a fresh, empty Postgres schema, dropped after the test."""
    url = pg_server.fresh_schema_url()
    yield url
    pg_server.drop_schema(url)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sqlite_only: the test's `db_url` (and `engine`, `ledger`) is SQLite only"
    )
    config.addinivalue_line(
        "markers",
        "fresh_processes: every `openbell` command the test runs is a fresh process, never forked "
        "from a zygote (start-up, imports, jails, what /proc shows: openbell_testkit.zygote)",
    )


@pytest.fixture(autouse=True)
def _fresh_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fresh `openbell` processes for a test marked `fresh_processes`."""
    if request.node.get_closest_marker("fresh_processes") is None:
        yield
        return
    FRESH.set()
    try:
        yield
    finally:
        FRESH.clear()


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A `sqlite_only` test that uses `db_url` gets only its SQLite run.

    Set as a `parametrize` mark before pytest reads the marks, so it takes the place of the
    fixture's own params.
    """
    if "db_url" in metafunc.fixturenames and metafunc.definition.get_closest_marker("sqlite_only"):
        metafunc.definition.add_marker(pytest.mark.parametrize("db_url", ["sqlite"], indirect=True))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """An empty database, once on SQLite and once on Postgres."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine on a database migrated to head (Alembic's upgrade once per process, then the
    same database made faster: `openbell_testkit.migrated`)."""
    migrate_to_head(db_url)
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    """The ledger on a migrated database."""
    return Ledger(engine)
