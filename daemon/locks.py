"""Exclusive claims on a ledger: one writer per SQLite file, one replay per Postgres account.

This module owns `DaemonLock` and `AccountLocks`. SQLite cannot arbitrate two writers' claims the
way Postgres can (DESIGN §8), so a daemon or a replay on a SQLite file holds an exclusive,
non-blocking `fcntl.flock` on a file beside it (`<database>.lock`, which names the holder) for its
whole run; a second daemon or replay fails at once with one clear line (an `OperatorError`, exit 2).
On Postgres, daemons share the work through the unique cycle claim, but a replay walks its
accounts' history in order and must be their only writer: it holds a session-level advisory lock
per account (keyed by the schema, the market and the agent's name) on a connection of its own, and
a second replay of any of those accounts is refused. The kernel drops a file lock, and Postgres an
advisory lock, when the process holding it dies, even after `kill -9`: a killed replay's claim
never blocks its `--resume`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import Connection, Engine, text

from openbell.markets.errors import OperatorError
from openbell.store.db import parse_url

#: How long a refused process waits for the lock's holder to name itself.
HOLDER_WAIT_S = 1.0


class DaemonLock:
    """The exclusive lock of one SQLite ledger, held by a `role` ("daemon" or "replay"); a no-op
    for Postgres."""

    def __init__(self, store_url: str, role: str = "daemon") -> None:
        url = parse_url(store_url)
        database = url.database if url.get_backend_name() == "sqlite" else None
        in_memory = not database or database == ":memory:" or database.startswith("file:")
        self.path = None if in_memory or database is None else Path(f"{database}.lock")
        self.role = role
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise `OperatorError` naming the process that holds it."""
        if self.path is None or self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pid, _, role = _holder(fd).partition(" ")
            os.close(fd)
            raise OperatorError(
                f"another openbell {role or 'process'} (pid {pid or 'unknown'}) already writes "
                f"to this SQLite ledger (lock {self.path}): a SQLite ledger has one writer at a "
                f"time; wait for it to end, give this {self.role} a ledger of its own with --db "
                "FILE (and another --listen HOST:PORT if it serves HTTP), or use Postgres to run "
                "several daemons"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {self.role}".encode())
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (the lock file stays)."""
        if self._fd is not None:
            # Emptied first, so the next holder's lock file never names this process.
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        """Whether this process holds the lock (always False for Postgres)."""
        return self._fd is not None


def daemon_writes(store_url: str) -> bool:
    """Whether a live daemon holds the lock of the SQLite ledger at `store_url` now: its lock file
    names a process of role "daemon" that is alive. Reads the file only (taking even a shared
    lock could make a starting daemon fail). False for Postgres, whose daemons hold no file lock,
    and for a replay's lock."""
    path = DaemonLock(store_url).path
    if path is None:
        return False
    try:
        named = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return False
    pid, _, role = named.partition(" ")
    if role != "daemon" or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except PermissionError:
        return True  # alive, another user's
    except OSError:
        return False  # gone (killed without emptying its lock file)
    return True


def _holder(fd: int) -> str:
    """The "pid role" a lock file names; its holder writes it just after taking the lock, so an
    empty file is read again for up to `HOLDER_WAIT_S`."""
    deadline = time.monotonic() + HOLDER_WAIT_S
    while True:
        named = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if named or time.monotonic() >= deadline:
            return named
        time.sleep(0.01)


class AccountLocks:
    """Postgres advisory locks on the accounts `(market, agent name)` of one replay; a no-op on
    SQLite (where `DaemonLock` excludes every other writer)."""

    def __init__(self, engine: Engine, accounts: Sequence[tuple[str, str]]) -> None:
        self.engine = engine
        self.accounts = tuple(sorted(set(accounts)))
        self._connection: Connection | None = None

    def acquire(self) -> None:
        """Take every account's lock, or none and raise `OperatorError` naming the first account
        another replay holds.

        The locks are taken in one order and the first busy one gives up the rest: of replays
        racing for overlapping accounts, at least one gets all of its own.
        """
        if self.engine.dialect.name != "postgresql" or self._connection is not None:
            return
        connection = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        # Off the pool: closing it closes the session, and with it every lock it holds.
        connection.detach()
        busy = None
        try:
            schema = str(connection.scalar(text("SELECT current_schema()")))
            for market, agent in self.accounts:
                key = lock_key(schema, market, agent)
                if not connection.scalar(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}):
                    busy = f"{market}/{agent}"
                    break
        except BaseException:
            connection.close()
            raise
        if busy is not None:
            connection.close()
            shown = self.engine.url.render_as_string(hide_password=True)
            raise OperatorError(
                f"another openbell replay is running on the account {busy} of ledger {shown}: "
                "one replay of an account at a time; wait for it to end "
                "(a replay cut off continues with --resume once it has stopped)"
            )
        self._connection = connection

    def release(self) -> None:
        """Drop the locks by closing their session."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    @property
    def held(self) -> bool:
        """Whether this process holds the locks (always False for SQLite)."""
        return self._connection is not None


def lock_key(schema: str, market: str, agent: str) -> int:
    """The signed 64-bit advisory lock key of the account `(market, agent)` in `schema`."""
    digest = hashlib.blake2b(
        f"openbell.replay\0{schema}\0{market}\0{agent}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)
