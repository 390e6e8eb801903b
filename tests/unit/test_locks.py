"""The daemon lock: one daemon per SQLite ledger file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from openbell.daemon.locks import DaemonLock, daemon_writes
from openbell.markets.errors import OperatorError


def test_second_daemon_on_one_sqlite_file_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    first, second = DaemonLock(url), DaemonLock(url)
    first.acquire()
    try:
        with pytest.raises(OperatorError, match="another openbell daemon"):
            second.acquire()
    finally:
        first.release()
    second.acquire()
    second.release()
    assert not DaemonLock("postgresql+psycopg://u@h/db").held


def test_a_refused_process_waits_for_the_holder_to_name_itself(tmp_path: Path) -> None:
    """Two replays start together: the one refused may read the lock file in the instant between
    the holder's `flock` and its write; it must still name the holder, not "pid unknown"."""
    import fcntl
    import threading

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    path = tmp_path / "ledger.db.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held, and not yet named
    named = threading.Timer(0.2, lambda: os.write(fd, b"4242 replay"))
    named.start()
    try:
        with pytest.raises(OperatorError, match=r"another openbell replay \(pid 4242\)"):
            DaemonLock(url, role="replay").acquire()
    finally:
        named.join()
        os.close(fd)


def test_a_released_lock_file_names_nobody(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    lock = DaemonLock(url, role="replay")
    lock.acquire()
    assert (tmp_path / "ledger.db.lock").read_text() == f"{os.getpid()} replay"
    lock.release()
    assert (tmp_path / "ledger.db.lock").read_text() == ""


def test_daemon_writes_only_while_a_live_daemon_holds_the_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert not daemon_writes(url)  # no lock file
    daemon = DaemonLock(url, role="daemon")
    daemon.acquire()
    assert daemon_writes(url)
    daemon.release()
    assert not daemon_writes(url)  # emptied on release
    replay = DaemonLock(url, role="replay")
    replay.acquire()
    assert not daemon_writes(url)  # a replay is not a daemon
    replay.release()
    dead = _ended_pid()
    Path(f"{tmp_path / 'ledger.db'}.lock").write_text(f"{dead} daemon")  # killed without release
    assert not daemon_writes(url)
    assert not daemon_writes("postgresql://localhost/test")


def _ended_pid() -> int:
    """The pid of a child that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
