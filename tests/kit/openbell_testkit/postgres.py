"""Postgres fault injection for tests that share one server with other runs."""

from __future__ import annotations

import psycopg
from sqlalchemy.engine import make_url


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
