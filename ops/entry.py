"""The `openbell` console script: it catches a stop before the command line's imports.

Importing the command line, and then what a command runs on (pandas, SQLAlchemy, the vendor
adapters, imported by the command when it runs), takes time; a SIGINT or SIGTERM in that time must
be neither lost nor fatal mid-way. So this module imports only `openbell.daemon.stopping`, records
both signals in a `StopRequest` first, and only then imports `openbell.ops.cli`, whose `main`
decides what the request means for the command run.

It also turns the cyclic garbage collector off before those imports: building thousands of
classes and functions triggers hundreds of collections that find nothing to free (about 0.3 s of
`openbell leaderboard`'s ~1.8 s). A command that reads the ledger and exits keeps it off; every
other command turns it back on once it is known (`ops.cli.app.QUICK_COMMANDS`), or, the replay,
once it has imported what it runs on (`ops.cli.app.COLLECTS_AFTER_IMPORTS`).

And before any thread starts (numpy's BLAS and pyarrow start their own), it caps glibc's malloc
at `MALLOC_ARENAS` arenas (`limit_malloc_arenas`): by default each thread that allocates may get an
arena of its own, up to eight per core, and the memory they keep is never given back, which held
a year-long hourly replay's peak RSS about 30 MB higher (398 MB against 370 MB,
`benchmarks/scale_bench.py`). A `MALLOC_ARENA_MAX` set in the environment is left as it is.

And it has structlog imported with rich hidden (`StructlogWithoutRich`): structlog imports
rich, and with it pygments, at its own import whenever rich is installed, only to offer rich's
tracebacks and reprs of locals, which openbell's logging never asks for (`ops.logs` renders
tracebacks plainly and without locals); that was about a tenth of a short replay's start-up. A
command that prints tables still imports rich itself, when it prints them.

And it has pydantic load no plugin (`PydanticWithoutPlugins`). A pydantic plugin is a package
that registers itself under the `pydantic` entry point group and is handed every value pydantic
validates: here the config with its API keys and every agent's tool arguments, which no package
merely installed beside openbell is let see. Looking for them also cost every command that makes
a model a scan of every installed package's metadata (20 to 90 ms with the development
environment's 165 packages).
`PYDANTIC_DISABLE_PLUGINS` would keep the plugins out too, but as a variable of the environment
it would be passed on to every process openbell starts (strategies, commands).

And it has numpy load OpenBLAS with one thread (`NumpyWithOneBlasThread`). OpenBLAS starts a
thread per core as it loads, and they spin a while before they sleep: about 0.1 s of CPU in every
process that imports numpy (pyarrow does, so every command that reads bars), where openbell's own
matrices (a factor model's features, the attribution's exposures) are a few hundred rows at most.
The variable is set only while numpy loads, so the processes openbell starts do not inherit it.

And once the command is done, it moves every object still alive out of the cyclic garbage
collector's way (`gc.freeze`) before the interpreter exits: the interpreter's finalization runs
the collector over whatever is alive as it clears the modules, and that is every class, function
and table the imports built (about 0.2 s of a 7-day replay's ~1 s). What a command opened it has
closed by then (the ledger's engine, its files); the rest is freed by reference counting as the
modules are cleared, or with the process.

The console script (`run`) goes one step further: when the command has returned and no other
thread runs, it ends the process as the interpreter would end it, `atexit` functions run and the
streams flushed, but without clearing the modules one by one (10 to 25 ms of a short command); a
command that raised or left a thread running, or whose output cannot be flushed, exits the
interpreter's way.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import importlib.util
import os
import sys
import threading
from collections.abc import Sequence
from importlib.abc import Loader
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import ClassVar, Final, NoReturn

from openbell.daemon.stopping import StopRequest

#: How many malloc arenas an openbell process keeps (glibc's `M_ARENA_MAX`).
MALLOC_ARENAS: Final = 2
_M_ARENA_MAX: Final = -8  # glibc's malloc.h
#: The variables OpenBLAS reads its thread count from when it loads, the first one first.
BLAS_THREAD_VARIABLES: Final = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


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


class FirstImport:
    """A meta path finder that finds module `NAME` once, the first time it is imported, with its
    loader wrapped (`wrap`), then leaves `sys.meta_path`."""

    NAME: ClassVar[str]

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != self.NAME:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = self.wrap(spec.loader)
        return spec

    def wrap(self, loader: Loader) -> Loader:
        raise NotImplementedError

    @classmethod
    def install(cls) -> None:
        if cls.NAME not in sys.modules:
            sys.meta_path.insert(0, cls())


class StructlogWithoutRich(FirstImport):
    """Has structlog imported as if rich were not installed (module docstring), whenever structlog
    is first imported: while structlog's package runs (it imports its submodules),
    `sys.modules["rich"]` is None, so `import rich` fails and structlog takes its own plain
    fallbacks; rich stays importable afterwards. A command that never logs never imports structlog
    (`--help`)."""

    NAME = "structlog"

    def wrap(self, loader: Loader) -> Loader:
        return loader if "rich" in sys.modules else _HidingRich(loader)


class PydanticWithoutPlugins(FirstImport):
    """Has pydantic load no plugin (module docstring): its registry of plugins
    (`pydantic.plugin._loader`, of which pydantic uses `get_plugins` alone) is made a module whose
    `get_plugins` finds none, without reading any package's entry points. A command that makes
    no model never imports it (`--help`)."""

    NAME = "pydantic.plugin._loader"

    def wrap(self, loader: Loader) -> Loader:
        return _NoPlugins(loader)


class NumpyWithOneBlasThread(FirstImport):
    """Has numpy load OpenBLAS with one thread (module docstring): while numpy's package runs (its
    core loads OpenBLAS, which reads the variable then), `OPENBLAS_NUM_THREADS` is 1, and it is
    taken out of the environment again afterwards, so the processes openbell starts never see it.
    A thread count the environment sets (`OPENBLAS_NUM_THREADS`, `GOTO_NUM_THREADS`,
    `OMP_NUM_THREADS`) is left as it is, and so is a command that never imports numpy."""

    NAME = "numpy"

    def wrap(self, loader: Loader) -> Loader:
        return loader if set(BLAS_THREAD_VARIABLES) & os.environ.keys() else _OneBlasThread(loader)


class _Wrapped(Loader):
    """A module's loader, run by another (`FirstImport.wrap`)."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)


class _HidingRich(_Wrapped):
    """Runs a module with rich hidden (`StructlogWithoutRich`)."""

    def exec_module(self, module: ModuleType) -> None:
        sys.modules["rich"] = None  # type: ignore[assignment]
        try:
            super().exec_module(module)
        finally:
            del sys.modules["rich"]


class _OneBlasThread(_Wrapped):
    """Runs a module with `OPENBLAS_NUM_THREADS=1` in the environment (`NumpyWithOneBlasThread`)."""

    def exec_module(self, module: ModuleType) -> None:
        os.environ[BLAS_THREAD_VARIABLES[0]] = "1"
        try:
            super().exec_module(module)
        finally:
            del os.environ[BLAS_THREAD_VARIABLES[0]]


class _NoPlugins(_Wrapped):
    """Makes pydantic's registry of plugins one that has none (`PydanticWithoutPlugins`), in
    place of running it."""

    def exec_module(self, module: ModuleType) -> None:
        module.get_plugins = no_plugins  # type: ignore[attr-defined]


def no_plugins() -> tuple[()]:
    """The pydantic plugins of an openbell process: none (`PydanticWithoutPlugins`)."""
    return ()


def main() -> int:
    """Run the `openbell` command line (sys.argv) with SIGINT and SIGTERM caught from the start."""
    stop = StopRequest()
    stop.catch_signals()
    limit_malloc_arenas()  # before any thread: see the module docstring
    gc.disable()  # until the command is known: see the module docstring
    StructlogWithoutRich.install()
    PydanticWithoutPlugins.install()
    NumpyWithOneBlasThread.install()
    from openbell.ops.cli import main as cli_main  # only now that the signals are caught

    try:
        return cli_main(stop=stop)
    finally:
        gc.freeze()  # nothing left to collect before the exit: see the module docstring


def run() -> NoReturn:
    """The `openbell` console script: `main`, then the process's end (module docstring)."""
    code = main()
    if threading.active_count() > 1:  # joined by the interpreter's exit, as any thread
        sys.exit(code)
    atexit._run_exitfuncs()  # the logs' handlers flushed and closed among them
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: started with the descriptor closed
                stream.flush()
    except (OSError, ValueError):  # a closed pipe, a full disk: the interpreter reports it
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    run()
