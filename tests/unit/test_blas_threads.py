"""The `openbell` command has numpy load OpenBLAS with one thread (`ops/entry.py`,
`NumpyWithOneBlasThread`), without leaving the variable in the environment its children get; a
thread count the environment sets is kept."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from openbell.ops.entry import BLAS_THREAD_VARIABLES

#: Imports numpy (through the wrapper with "one"), then prints OpenBLAS's thread count, asked of
#: the library numpy loaded (found in the process's maps), and the variable as the process has it.
_CHILD = textwrap.dedent(
    """
    import ctypes, os, sys
    from openbell.ops.entry import NumpyWithOneBlasThread
    if sys.argv[1] == "one":
        NumpyWithOneBlasThread.install()
    import numpy
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    if not paths:
        print("none")
        raise SystemExit
    library = ctypes.CDLL(sorted(paths)[0])
    names = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
             "openblas_get_num_threads")
    count = next(getattr(library, name)() for name in names if hasattr(library, name))
    print(count, os.environ.get("OPENBLAS_NUM_THREADS", "-"))
    """
)


def _blas(mode: str, **env: str) -> tuple[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES} | env
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        timeout=60,
    )
    if done.stdout.strip() == "none":
        pytest.skip("numpy here does not load OpenBLAS")
    threads, variable = done.stdout.split()
    return threads, variable


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts one thread on one core")
def test_numpy_loads_openblas_with_one_thread_and_the_variable_is_gone_after() -> None:
    # Without the wrapper, OpenBLAS takes a thread per core: the check can tell the two apart.
    assert _blas("plain") == (str(os.cpu_count()), "-")
    assert _blas("one") == ("1", "-")


def test_a_thread_count_set_in_the_environment_is_kept() -> None:
    assert _blas("one", OPENBLAS_NUM_THREADS="2") == ("2", "2")
    threads, variable = _blas("one", OMP_NUM_THREADS="2")
    assert (threads, variable) == ("2", "-")
