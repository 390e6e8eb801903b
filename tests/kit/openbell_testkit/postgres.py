"""The test Postgres server: a fresh schema per test (dropped after it), and fault injection that
spares other runs.

`PgServer` is what the `pg_server` fixture (tests/conftest.py) yields (it drops the schemas in a
thread of its own, behind the tests); `terminate_connections` kills the connections of one test's
schema only.
"""

from __future__ import annotations

import itertools
import queue
import threading
from dataclasses import dataclass, field

import psycopg
from sqlalchemy.engine import make_url

PG_DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@dataclass
class PgServer:
    """A reachable Postgres database and the schemas this test session created in it."""

    url: str
    prefix: str
    schemas: list[str] = field(default_factory=list)
    _counter: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _drops: queue.Queue[str | None] = field(default_factory=queue.Queue)
    _dropper: threading.Thread | None = None

    @property
    def conninfo(self) -> str:
        return make_url(self.url).set(drivername="postgresql").render_as_string(False)

    def fresh_schema_url(self) -> str:
        """Create an empty schema and return a URL whose search_path points at it."""
        schema = f"{self.prefix}_{next(self._counter)}"
        with psycopg.connect(self.conninfo, autocommit=True) as connection:
            connection.execute(f'CREATE SCHEMA "{schema}"')
        with self._lock:
            self.schemas.append(schema)
        url = make_url(self.url).set(drivername="postgresql+psycopg")
        # A commit does not wait for its WAL to reach the disk (`synchronous_commit=off`): what
        # every connection sees is the same, only a crash of the server could lose the last
        # commits, and no test crashes it. It halves the time of the tests that commit often.
        options = f"-csearch_path={schema} -csynchronous_commit=off"
        query = {"options": options, "application_name": schema}
        return url.update_query_dict(query).render_as_string(hide_password=False)

    def drop_schema(self, url: str) -> None:
        """Drop the schema of `url` (a `fresh_schema_url`) when nothing holds a lock in it, in the
        background: the next test does not wait for it (a thread of the session's drops the
        schemas one after another, on one connection).

        A schema still locked within a few seconds (a connection the test left open in a
        transaction) stays in `schemas`, for `drop_all` at the end of the session.
        """
        schema = make_url(url).query.get("application_name")
        if not isinstance(schema, str) or schema not in self.schemas:
            return
        if self._dropper is None:
            self._dropper = threading.Thread(target=self._drop_queued, name="pg-drops", daemon=True)
            self._dropper.start()
        self._drops.put(schema)

    def _drop_queued(self) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as connection:
            connection.execute("SET lock_timeout = '5s'")
            while (schema := self._drops.get()) is not None:
                try:
                    connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                except psycopg.errors.LockNotAvailable:
                    continue
                with self._lock:
                    self.schemas.remove(schema)

    def drop_all(self) -> None:
        """Drop every schema of this session still there (after the queued drops)."""
        if self._dropper is not None:
            self._drops.put(None)
            self._dropper.join()
            self._dropper = None
        with psycopg.connect(self.conninfo, autocommit=True) as connection:
            for schema in self.schemas:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        self.schemas.clear()


def terminate_connections(url: str) -> int:
    """Terminate the server connections opened through `url` (a `fresh_schema_url`) and no other.

    Connections are told apart by their `application_name`, which is unique to the test's schema:
    another run's connections on the same server and database, even of the same user, survive.
    Returns how many connections were terminated.
    """
    parsed = make_url(url)
    name = parsed.query.get("application_name")
    if not isinstance(name, str) or not name:
        raise ValueError("terminate_connections needs a URL with its own application_name")
    conninfo = parsed.set(drivername="postgresql", query={}).render_as_string(False)
    with psycopg.connect(conninfo, autocommit=True, application_name="openbell-fault") as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchone()
    return 0 if row is None else int(row[0])
