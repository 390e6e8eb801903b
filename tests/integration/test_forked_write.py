"""A replay's batch written by a forked child (`store/forked_write.py`), on real SQLite files: the
write lands from another process, its error is raised in the replay, a child killed or orphaned
ends its write, a file of the ledger still open in the process keeps the write in it, and a replay
of baselines that forks its batches leaves the ledger one written in the process leaves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from openbell.agents.baselines import BASELINE_KINDS, build_agent
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.store.db import make_engine
from openbell.store.forked_write import BatchWriteLost, ForkedWrite
from openbell.store.migrate import upgrade
from openbell_testkit.replay import crypto_daily
from openbell_testkit.store import dump_tables

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or len(os.sched_getaffinity(0)) < 2,
    reason="batches are forked on Linux with two cores or more",
)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Engine]:
    """A SQLite file with one table the writes below fill."""
    engine = make_engine(f"sqlite:///{(tmp_path / 'ledger.db').as_posix()}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE written (pid INTEGER, note TEXT)"))
    yield engine
    engine.dispose()


def _rows(engine: Engine) -> list[tuple[int, str]]:
    with engine.connect() as connection:
        return [(row.pid, row.note) for row in connection.execute(text("SELECT * FROM written"))]


def _insert(engine: Engine, note: str) -> None:
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO written VALUES (:pid, :note)"), {"pid": os.getpid(), "note": note}
        )


def test_the_write_runs_in_a_child_process_and_is_in_the_ledger_after_wait(
    ledger: Engine,
) -> None:
    forked = ForkedWrite.of(ledger)
    assert forked is not None
    for note in ("first", "second"):  # one at a time, in order
        assert forked.start(lambda note=note: _insert(ledger, note))
    forked.wait()
    rows = _rows(ledger)
    assert [note for _pid, note in rows] == ["first", "second"]
    assert all(pid != os.getpid() for pid, _note in rows)
    assert len({pid for pid, _note in rows}) == 2


def test_the_childs_error_is_raised_by_wait_once(ledger: Engine) -> None:
    forked = ForkedWrite.of(ledger)
    assert forked is not None

    def fails() -> None:
        _insert(ledger, "rolled back")
        with ledger.begin() as connection:
            connection.execute(text("INSERT INTO nowhere VALUES (1)"))

    assert forked.start(fails)
    with pytest.raises(Exception, match="no such table: nowhere") as raised:
        forked.wait()
    assert type(raised.value).__name__ == "OperationalError"
    forked.wait()  # raised once
    assert _rows(ledger)[0][1] == "rolled back"  # its own transaction, committed before


def test_an_error_that_does_not_pickle_is_raised_by_its_name(ledger: Engine) -> None:
    class Local(Exception):  # a class pickle cannot find by name
        pass

    forked = ForkedWrite.of(ledger)
    assert forked is not None

    def fails() -> None:
        raise Local("cannot travel")

    assert forked.start(fails)
    with pytest.raises(RuntimeError, match="Local: cannot travel"):
        forked.wait()


def test_a_child_killed_by_a_signal_is_a_lost_batch(ledger: Engine) -> None:
    forked = ForkedWrite.of(ledger)
    assert forked is not None
    assert forked.start(lambda: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(BatchWriteLost, match="signal 9"):
        forked.wait()
    assert _rows(ledger) == []


def test_a_child_reaped_by_another_wait_still_says_how_it_went(
    ledger: Engine, tmp_path: Path
) -> None:
    """Another wait for any child (an old-style child watcher) may reap the child first: what it
    said through the pipe is the outcome."""
    forked = ForkedWrite.of(ledger)
    assert forked is not None
    pid_file = tmp_path / "pid"

    def written() -> None:
        _insert(ledger, "reaped elsewhere")
        pid_file.write_text(str(os.getpid()))

    def fails() -> None:
        pid_file.write_text(str(os.getpid()))
        raise ValueError("no batch")

    assert forked.start(written)
    _wait_for(lambda: pid_file.exists() and pid_file.read_text() != "")
    os.waitpid(int(pid_file.read_text()), 0)
    forked.wait()
    assert [note for _pid, note in _rows(ledger)] == ["reaped elsewhere"]
    pid_file.unlink()
    assert forked.start(fails)
    _wait_for(lambda: pid_file.exists() and pid_file.read_text() != "")
    os.waitpid(int(pid_file.read_text()), 0)
    with pytest.raises(ValueError, match="no batch"):
        forked.wait()


def test_the_child_finishes_its_write_through_an_interrupt(ledger: Engine, tmp_path: Path) -> None:
    """Ctrl-C reaches the replay's whole process group: the child ignores it and writes on."""
    forked = ForkedWrite.of(ledger)
    assert forked is not None
    ready = tmp_path / "ready"

    def slow() -> None:
        ready.write_text(str(os.getpid()))
        time.sleep(0.5)
        _insert(ledger, "after the interrupt")

    assert forked.start(slow)
    _wait_for(ready.exists)
    os.kill(int(ready.read_text()), signal.SIGINT)
    os.kill(int(ready.read_text()), signal.SIGTERM)
    forked.wait()
    assert [note for _pid, note in _rows(ledger)] == ["after the interrupt"]


def test_a_file_of_the_ledger_open_in_the_process_keeps_the_write_here(
    ledger: Engine,
) -> None:
    forked = ForkedWrite.of(ledger)
    assert forked is not None
    other = make_engine(str(ledger.url))  # another engine's connection, still open
    try:
        with other.connect():
            assert not forked.start(lambda: _insert(ledger, "never"))
    finally:
        other.dispose()
    forked.wait()
    assert _rows(ledger) == []
    assert forked.start(lambda: _insert(ledger, "once closed"))
    forked.wait()
    assert [note for _pid, note in _rows(ledger)] == ["once closed"]


@pytest.mark.parametrize(
    "url",
    ["sqlite://", "sqlite:///:memory:", "postgresql+psycopg://localhost/test"],
    ids=["memory", "named-memory", "postgres"],
)
def test_no_fork_where_the_ledger_is_not_a_sqlite_file(url: str) -> None:
    engine = make_engine(url)
    try:
        assert ForkedWrite.of(engine) is None
    finally:
        engine.dispose()


#: A replay stand-in: a forked write that never ends (the child's pid written to argv[2]), and a
#: parent that waits to be killed.
_ORPHANING = textwrap.dedent(
    """
    import os, sys, time
    from sqlalchemy import text
    from openbell.store.db import make_engine
    from openbell.store.forked_write import ForkedWrite
    engine = make_engine(sys.argv[1])
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE written (pid INTEGER, note TEXT)"))

    def write():
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO written VALUES (1, 'cut off')"))
            with open(sys.argv[2], "w") as out:
                out.write(str(os.getpid()))
            time.sleep(60)

    assert ForkedWrite.of(engine).start(write)
    time.sleep(60)
    """
)


def test_the_child_dies_with_a_killed_replay(tmp_path: Path) -> None:
    """kill -9 of the replay takes its child with it (its write is rolled back by SQLite)."""
    url = f"sqlite:///{(tmp_path / 'ledger.db').as_posix()}"
    child_pid = tmp_path / "child.pid"
    replay = subprocess.Popen([sys.executable, "-c", _ORPHANING, url, str(child_pid)])
    try:
        _wait_for(child_pid.exists)
        _wait_for(lambda: child_pid.read_text() != "")
        pid = int(child_pid.read_text())
        assert _alive(pid)
        replay.kill()
        replay.wait(timeout=10)
        _wait_for(lambda: not _alive(pid))
    finally:
        replay.kill()
    engine = make_engine(url)
    try:
        assert _rows(engine) == []
    finally:
        engine.dispose()


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rpartition(")")[2].split()[0] != "Z"


def _wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{condition} still false after {timeout_s} s")
        time.sleep(0.01)


def test_a_replay_that_forks_its_batches_leaves_the_ledger_of_one_that_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every baseline on the crypto dailies for two months, a batch every five slots: forked
    (counted), then written in the process (`ForkedWrite.of` made None): the same rows."""
    started: list[bool] = []
    start = ForkedWrite.start

    def counted(self: ForkedWrite, write: object) -> bool:
        started.append(start(self, write))  # type: ignore[arg-type]
        return started[-1]

    dumps = []
    for name in ("forked", "in-process"):
        url = f"sqlite:///{(tmp_path / name).as_posix()}.db"
        upgrade(url)
        if name == "forked":
            monkeypatch.setattr(ForkedWrite, "start", counted)
        else:
            monkeypatch.setattr(ForkedWrite, "of", classmethod(lambda cls, engine: None))
        agents = (
            build_agent(kind, kind.replace("_", "-"), market="crypto", seed=3)
            for kind in BASELINE_KINDS
        )
        plan = ReplayPlan(
            store_url=url,
            start_at=utc(2025, 9, 1),
            end_at=utc(2025, 11, 1),
            markets=(crypto_daily(*agents),),
            batch_slots=5,
        )
        report = run_replay(plan)
        assert report.cycles_failed == 0
        engine = make_engine(url)
        try:
            dumps.append(dump_tables(engine))
        finally:
            engine.dispose()
    assert len(started) >= 10
    assert all(started)
    assert dumps[0] == dumps[1]
    assert dumps[0]["fill"]
    assert dumps[0]["cycle_digest"]
