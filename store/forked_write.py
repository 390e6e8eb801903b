"""A replay's batch written by a forked child process while the replay goes on.

Internal to `openbell.store`, for `ReplayLedger` (`replay_ledger.py`). A replay of rule baselines
never waits, and its batches' writes (the rows' values, the hash chain, SQLite's inserts: about a
quarter of a full replay's walk) hold the interpreter: a worker thread (`WriteBehind`) would only
take turns with the walk for it. A child process forked when a batch is sealed has the batch in its
memory as it was (copy-on-write), writes it in one transaction on a connection of its own and
exits, while the walk goes on on another core. Batches are still written one at a time and in
order: the next fork, and every read or write of the ledger, waits for the child first (`wait`),
and an error of the child's is raised there, as the write's own error where it can be pickled.

Only for a SQLite file on Linux (`ForkedWrite.of`); Postgres, and SQLite in memory (which is the
process's own), write in the process. SQLite's rule for `fork`
(https://www.sqlite.org/howtocorrupt.html, section 2.6) is that a connection used in a child is
opened in the child: before each fork the parent closes its pooled connections
(`Engine.dispose`), and it forks only when no file of the ledger is open in the process any more
(`/proc/self/fd`); otherwise the batch is written in the process, as before.

The child takes no signal from the terminal or a service manager (SIGINT, SIGTERM: the replay
decides, and the child's write is short), and dies with the replay (`PR_SET_PDEATHSIG`): a replay
killed with `kill -9` takes its child with it, SQLite rolls the child's unfinished transaction
back, and `--resume` starts from the last committed batch, as for a batch written in the process.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from sqlalchemy import Engine

from openbell.markets.errors import OperatorError
from openbell.store.db import sqlite_file

#: `prctl`'s option that has the kernel signal a process when its parent dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1

#: What a child says once its batch is committed (a pickle, its error, never starts so).
_WRITTEN = b"\0"

#: The suffixes of a SQLite ledger's files: the database, its WAL, its shared memory, its journal.
_LEDGER_FILES = ("", "-wal", "-shm", "-journal")


class BatchWriteLost(OperatorError):
    """The child writing a batch ended without saying how it went (killed by a signal: out of
    memory, say): the ledger ends at the last batch committed, where `--resume` goes on from."""


@dataclass(slots=True)
class _Child:
    pid: int
    report: int  # the read end of the pipe the child writes its error to (-1 once read)
    said: bytes = b""


class ForkedWrite:
    """Writes one batch at a time in a forked child: `start` a write, `wait` until it has ended
    (raising its error, once). See the module docstring."""

    def __init__(self, engine: Engine, database: Path) -> None:
        self._engine = engine
        self._files = tuple(Path(f"{database.resolve()}{suffix}") for suffix in _LEDGER_FILES)
        self._child: _Child | None = None

    @classmethod
    def of(cls, engine: Engine) -> ForkedWrite | None:
        """The forked writer of `engine`'s ledger; None where batches are written in the process
        (Postgres, SQLite in memory or by `file:` URI, a system other than Linux)."""
        database = sqlite_file(engine.url.render_as_string(hide_password=False))
        if database is None or sys.platform != "linux":
            return None
        if len(os.sched_getaffinity(0)) < 2:  # one core: the child would only take turns with it
            return None
        return cls(engine, database)

    def start(self, write: Callable[[], None]) -> bool:
        """Run `write` in a forked child, once the one before has ended (its error raised);
        False, having run nothing, when this process still has a file of the ledger open (the
        caller then writes in the process)."""
        self.wait()
        self._engine.dispose()  # the child opens its own connection (SQLite's rule for fork)
        if self._ledger_open():
            return False
        report, reported = os.pipe()
        parent = os.getpid()
        try:
            with warnings.catch_warnings():
                # Python 3.12+ warns of a fork in a process with threads: here they are the C
                # libraries' own (pyarrow's jemalloc, BLAS), and the child takes none of their
                # locks: it runs the write alone (Python's and glibc's allocators and locks are
                # made safe for fork) and exits.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError:  # no process to be had (a limit on processes, memory): write here
            os.close(report)
            os.close(reported)
            return False
        if pid == 0:  # pragma: no cover  (the child; it reports through the pipe and exits)
            os.close(report)
            _run_child(write, reported, parent)
        os.close(reported)
        self._child = _Child(pid=pid, report=report)
        return True

    def wait(self) -> None:
        """Block until the write started last has ended; raise its error if it failed. A wait
        cut off (by an interrupt) is taken up again by the next one: the child is waited for
        before anything else touches the ledger."""
        child = self._child
        if child is None:
            return
        if child.report >= 0:
            with os.fdopen(child.report, "rb") as report:
                child.said = report.read()
            child.report = -1
        try:
            _, status = os.waitpid(child.pid, 0)
            ended = _ending(os.waitstatus_to_exitcode(status))
        except ChildProcessError:  # reaped by another's wait for any child: the pipe tells
            ended = "an end another wait took"
        self._child = None
        if child.said == _WRITTEN:
            return
        if child.said:
            raise _error_of(child.said)
        raise BatchWriteLost(
            f"the process writing a replay batch ended with {ended} before it said the batch "
            "was written: the ledger ends at that batch or the one before it (run the replay "
            "again with --resume to go on from there)"
        )

    def _ledger_open(self) -> bool:
        """Whether a file of the ledger is open in this process (a connection of another engine,
        say): a child must not inherit SQLite's state of it."""
        fds = Path("/proc/self/fd")
        for fd in fds.iterdir():
            try:
                target = Path(os.readlink(fd))
            except OSError:  # closed meanwhile (the listing's own descriptor)
                continue
            if target in self._files:
                return True
        return False


def _run_child(write: Callable[[], None], reported: int, parent: int) -> NoReturn:
    """The child: ignore the signals the replay handles, die with it, `write`, say how it went
    into `reported` (`_WRITTEN`, or the write's error pickled) and exit at once (no handlers, no
    buffers flushed). A child that says nothing did not write its batch."""
    code = 1
    said = b""
    try:
        import ctypes  # the child's alone: not on every command's start-up

        gc.disable()  # a collection would touch, and so copy, every page of the parent's heap
        signal.set_wakeup_fd(-1)  # the replay's event loop's: a signal here is not the replay's
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:  # the replay died before the line above
            os._exit(1)
        write()
        said = _WRITTEN
        code = 0
    except BaseException as exc:  # noqa: BLE001  (reported to the parent, which raises it)
        said = _pickled(exc)
    try:
        with os.fdopen(reported, "wb") as report:
            report.write(said)
    finally:
        os._exit(code)


def _ending(code: int) -> str:
    """How a child ended, from its exit code (negative: the signal that killed it)."""
    return f"signal {-code}" if code < 0 else f"exit status {code}"


def _pickled(exc: BaseException) -> bytes:
    """`exc` pickled, or, where it does not pickle, a `RuntimeError` naming it."""
    try:
        return pickle.dumps(exc)
    except Exception:  # noqa: BLE001  (any error of pickling: the message is what is left)
        return pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))


def _error_of(said: bytes) -> Exception:
    """The error a child pickled (from this process's own fork, which runs only the write)."""
    try:
        error = pickle.loads(said)  # noqa: S301  (our own child's bytes, not an agent's)
    except Exception as exc:  # noqa: BLE001  (an error that pickles but does not unpickle)
        return BatchWriteLost(f"the process writing a replay batch failed: {exc}")
    if isinstance(error, Exception):
        return error
    # Not an error of the write (an interrupt, an exit): the batch is lost, the replay is not
    return BatchWriteLost(f"the process writing a replay batch ended by {error!r}")
