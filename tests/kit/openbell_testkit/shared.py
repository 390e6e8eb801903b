"""What the workers of one pytest run share: a directory built once per run, not once per worker.

`make pytest` runs the suite in pytest-xdist workers, each a process with its own session
fixtures, so a session fixture that builds something expensive (the demo's ledger) would build it
in every worker. `built_once(tmp_path_factory, name, build)` builds it once per run: the worker
that asks first takes an exclusive lock in the run's temporary directory (the parent of every
worker's own), calls `build(directory)` and marks the directory done; the others wait on the lock
and get the same directory. Without xdist it is a directory of the session. What is built is
read-only for the tests (a test that writes copies it first).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def run_temp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary directory of the whole run: shared by its xdist workers (each has its own
    below it), or the session's own without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """The directory `name` of this run, made by `build` in the first worker that asks for it.

    A build that raised leaves no mark, so the next worker to ask builds again (and fails alike).
    """
    base = run_temp_dir(tmp_path_factory)
    directory = base / f"built-{name}"
    done = directory / ".built"
    with (base / f"built-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            build(directory)
            done.touch()
    return directory
