"""One daemon per SQLite ledger: an exclusive `fcntl.flock` on `<database>.lock`.

This module owns `DaemonLock`. SQLite cannot arbitrate two daemons' claims the way Postgres can
(DESIGN §8), so a daemon on a SQLite file holds an exclusive, non-blocking lock on a file beside it
for its whole life; a second daemon fails at once with one clear line (an `OperatorError`, exit 2).
The kernel drops the lock when the process dies, even after `kill -9`. Postgres needs no lock: its
daemons share the work through the unique cycle claim.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from openbell.markets.errors import OperatorError
from openbell.store.db import parse_url


class DaemonLock:
    """The exclusive lock of one SQLite ledger; a no-op for Postgres."""

    def __init__(self, store_url: str) -> None:
        url = parse_url(store_url)
        database = url.database if url.get_backend_name() == "sqlite" else None
        in_memory = not database or database == ":memory:" or database.startswith("file:")
        self.path = None if in_memory or database is None else Path(f"{database}.lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise `OperatorError` when another daemon holds it."""
        if self.path is None or self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise OperatorError(
                f"another openbell daemon (pid {holder}) already runs on this SQLite ledger "
                f"(lock {self.path}); stop it, or use Postgres to run several daemons"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (the lock file stays)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        """Whether this process holds the lock (always False for Postgres)."""
        return self._fd is not None
