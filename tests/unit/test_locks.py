"""The daemon lock: one daemon per SQLite ledger file."""

from __future__ import annotations

from pathlib import Path

import pytest

from openbell.daemon.locks import DaemonLock
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
