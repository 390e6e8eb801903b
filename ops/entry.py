"""The `openbell` console script: it catches a stop before the command line's imports.

Importing the command line, and then what a command runs on (pandas, SQLAlchemy, the vendor
adapters, imported by the command when it runs), takes time; a SIGINT or SIGTERM in that time must
be neither lost nor fatal mid-way. So this module imports only `openbell.daemon.stopping`, records
both signals in a `StopRequest` first, and only then imports `openbell.ops.cli`, whose `main`
decides what the request means for the command run.

It also turns the cyclic garbage collector off before those imports: building thousands of
classes and functions triggers hundreds of collections that find nothing to free (about 0.3 s of
`openbell leaderboard`'s ~1.8 s). A command that reads the ledger and exits keeps it off; every
other command turns it back on once it is known (`ops.cli.app.QUICK_COMMANDS`).

And before any thread starts (numpy's BLAS and pyarrow start their own), it caps glibc's malloc
at `MALLOC_ARENAS` arenas (`limit_malloc_arenas`): by default each thread that allocates may get an
arena of its own, up to eight per core, and the memory they keep is never given back, which held
a year-long hourly replay's peak RSS about 30 MB higher (398 MB against 370 MB,
`benchmarks/scale_bench.py`). A `MALLOC_ARENA_MAX` set in the environment is left as it is.

And it imports structlog with rich hidden (`import_structlog_without_rich`): structlog imports
rich, and with it pygments, at its own import whenever rich is installed, only to offer rich's
tracebacks and reprs of locals, which openbell's logging never asks for (`ops.logs` renders
tracebacks plainly and without locals); that was about a tenth of a short replay's start-up. A
command that prints tables still imports rich itself, when it prints them.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
from typing import Final

from openbell.daemon.stopping import StopRequest

#: How many malloc arenas an openbell process keeps (glibc's `M_ARENA_MAX`).
MALLOC_ARENAS: Final = 2
_M_ARENA_MAX: Final = -8  # glibc's malloc.h


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc at `arenas` arenas for this process, unless `MALLOC_ARENA_MAX` is set;
    whether it did (False off Linux, without glibc's `mallopt`, or when it refuses)."""
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    return bool(mallopt(ctypes.c_int(_M_ARENA_MAX), ctypes.c_int(arenas)))


def import_structlog_without_rich() -> None:
    """Import structlog as if rich were not installed (see the module docstring), unless
    structlog or rich is imported already: `import rich` fails while `sys.modules["rich"]` is
    None, so structlog takes its own plain fallbacks, and rich stays importable afterwards."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


def main() -> int:
    """Run the `openbell` command line (sys.argv) with SIGINT and SIGTERM caught from the start."""
    stop = StopRequest()
    stop.catch_signals()
    limit_malloc_arenas()  # before any thread: see the module docstring
    gc.disable()  # until the command is known: see the module docstring
    import_structlog_without_rich()
    from openbell.ops.cli import main as cli_main  # only now that the signals are caught

    return cli_main(stop=stop)


if __name__ == "__main__":
    sys.exit(main())
