"""The sandboxed child process that runs a model's strategy once: `python -I child.py CPU_S AS_MB`.

Not imported by openbell: `sandbox.py` runs this file in a fresh interpreter (isolated mode, an
empty environment, a temporary working directory, its own process group). In order, before any
model code is seen, it: caps its own CPU time (`RLIMIT_CPU`), address space (`RLIMIT_AS`), file
size (`RLIMIT_FSIZE = 0`: no byte can be written to a file) and core dumps; reads the whole request
(`{"code": ..., "bars": {symbol: {"index": [...], "open": [...], ...}}}`) from stdin; imports the
allowed modules and builds the frames; then lowers `RLIMIT_NOFILE` to the three standard streams,
so that no file, socket or pipe can be opened any more (and no new process can load a library).
The code is then executed with a restricted set of builtins (no open, eval, exec, getattr,
`__import__` but an allow-listed importer, ...), `strategy(bars)` is called with stdout captured,
and one JSON line is written: `{"weights": {symbol: number}}` or `{"error": "..."}`.
"""

from __future__ import annotations

import builtins
import io
import json
import resource
import sys
from collections.abc import Mapping
from typing import Any

_ALLOWED = frozenset({"pandas", "numpy", "math", "statistics"})
_SAFE_BUILTINS = (
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "int",
    "isinstance", "len", "list", "map", "max", "min", "pow", "range", "reversed", "round", "set",
    "slice", "sorted", "str", "sum", "tuple", "zip", "print", "frozenset", "iter", "next",
    "Exception", "ValueError", "KeyError", "IndexError", "TypeError", "ZeroDivisionError",
    "ArithmeticError", "LookupError", "StopIteration", "RuntimeError", "FloatingPointError",
    "OverflowError", "None", "True", "False",
)  # fmt: skip
_COLUMNS = ("open", "high", "low", "close", "volume")


#: Calls that need no new file descriptor but change the world: refused in `os`, `posix` and
#: `resource` once the limits are set, in case the code reaches those modules through a library.
_NEUTERED = (
    "system", "popen", "kill", "killpg", "unlink", "remove", "rmdir", "removedirs", "rename",
    "renames", "replace", "chmod", "fchmod", "chown", "fchown", "lchown", "link", "symlink",
    "truncate", "ftruncate", "mkdir", "makedirs", "mkfifo", "mknod", "chdir", "fchdir", "chroot",
    "fork", "forkpty", "vfork", "execv", "execve", "execl", "execle", "execlp", "execlpe",
    "execvp", "execvpe", "spawnv", "spawnve", "spawnl", "spawnle", "posix_spawn", "posix_spawnp",
    "setuid", "setgid", "seteuid", "setegid", "setreuid", "setregid", "setresuid", "setresgid",
    "putenv", "unsetenv", "setrlimit", "prlimit", "utime", "write", "pwrite", "writev",
    "sendfile", "dup", "dup2", "close", "closerange", "pidfd_open", "setpgid", "setsid",
)  # fmt: skip


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def _refused(*args: object, **kwargs: object) -> None:
    raise PermissionError("not allowed in the strategy sandbox")


def _neuter() -> None:
    import os
    import posix

    for module in (os, posix, resource):
        for name in _NEUTERED:
            if hasattr(module, name):
                setattr(module, name, _refused)


def _safe_import(
    name: str,
    globals_: Mapping[str, object] | None = None,
    locals_: Mapping[str, object] | None = None,
    fromlist: tuple[str, ...] = (),
    level: int = 0,
) -> Any:
    if level != 0 or name not in _ALLOWED:
        raise ImportError(f"import of {name!r} is not allowed")
    return __import__(name, globals_, locals_, fromlist, level)


def _frames(bars: Mapping[str, Mapping[str, list[Any]]]) -> dict[str, Any]:
    import pandas as pd

    frames = {}
    for symbol, table in bars.items():
        index = pd.DatetimeIndex(pd.to_datetime(table["index"], utc=True), name="start_at")
        frames[symbol] = pd.DataFrame(
            {column: [float(value) for value in table[column]] for column in _COLUMNS},
            index=index,
        )
    return frames


def _weights(found: object) -> dict[str, float]:
    if not isinstance(found, Mapping):
        raise TypeError(f"strategy returned {type(found).__name__}, not a dict of weights")
    weights = {}
    for symbol, weight in found.items():
        if not isinstance(symbol, str):
            raise TypeError(f"weight keys must be symbols (str), got {symbol!r}")
        weights[symbol] = float(weight)
    return weights


def main() -> None:
    cpu_s, memory_mb = int(sys.argv[1]), int(sys.argv[2])
    _limit(resource.RLIMIT_CPU, cpu_s)
    _limit(resource.RLIMIT_AS, memory_mb * 1024 * 1024)
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_CORE, 0)
    request = json.loads(sys.stdin.read())
    import math  # noqa: F401  (imported before the file limit, for the strategy's imports)
    import statistics  # noqa: F401

    import numpy  # noqa: F401
    import pandas  # noqa: F401

    frames = _frames(request["bars"])
    out = sys.stdout
    sys.stdin.close()
    _limit(resource.RLIMIT_NOFILE, 3)
    _neuter()
    captured = io.StringIO()
    sys.stdout = captured
    try:
        safe = {name: getattr(builtins, name) for name in _SAFE_BUILTINS}
        safe["__import__"] = _safe_import
        namespace: dict[str, Any] = {"__builtins__": safe, "__name__": "strategy_code"}
        exec(compile(request["code"], "<strategy>", "exec"), namespace)  # noqa: S102
        answer: dict[str, object] = {"weights": _weights(namespace["strategy"](frames))}
    except BaseException as exc:  # noqa: BLE001  (any failure of the model's code is its answer)
        answer = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    out.write(json.dumps(answer) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
