"""The child process that runs a model's strategy once: `python -I child.py CPU_S AS_MB [SITE]`.

Not imported by openbell: `sandbox.py` runs this file in a fresh interpreter, in the jail
(`agents/jail/python_jail.py`: `-I -S`, the allowed packages at SITE, which is put on the path)
or, where the operator allowed it, as a plain subprocess. These are the Python-level walls, the
second line behind the jail. In order, before any model code is seen, it:

1. caps its own CPU time (`RLIMIT_CPU`), address space (`RLIMIT_AS`), file size
   (`RLIMIT_FSIZE = 0`: no byte can be written to a file) and core dumps;
2. installs an audit hook (`sys.addaudithook`, which cannot be removed), idle until armed;
3. reads the whole request (`{"code": ..., "bars": {symbol: {"index": [...], "open": [...],
   ...}}}`) from stdin, imports the allowed modules, builds the frames and formats one, so that
   what pandas imports lazily to print a frame is loaded;
4. puts `/dev/null` on fd 0 (stdin closed, its descriptor not left free), lowers
   `RLIMIT_NOFILE` to the three standard streams (no file, socket or pipe can be opened any
   more), replaces the `os`, `posix` and `resource` calls that need no new descriptor (kill,
   unlink, fork, setrlimit, ...) by a refusal, turns the cyclic garbage collector and warnings
   off and captures stdout and stderr;
5. arms the hook and runs the code in a new thread, from a function compiled into the model's
   own namespace (`_ENTRY`): the bottom of every frame walk from the model's code (`f_back`),
   with the model's globals and restricted builtins; `main` and this module are not reached.

Armed, the hook refuses every audit event but a few harmless ones (`_HARMLESS`). Four more
(`_LIBRARY_ONLY`: `compile`, `exec`, `sys._getframe` and `object.__getattr__`, which CPython
raises for the frame and code attributes `gi_frame`, `cr_frame`, `ag_frame`, `tb_frame`, `f_code`
and `gi_code`, ...) are allowed to library code only: pandas looks at its caller's frame on every
`df[col] = ...` and `collections.namedtuple` compiles code, but the model's own code (file
`<strategy>`) may do none of it. So `open`, `import` of a module not loaded yet, every `os.*`,
`subprocess.*`, `socket.*`, `ctypes.*`, `gc.*` and `sys.*` event raises `PermissionError`, from
wherever the code reached the function (a frame's `f_builtins`, a module's attribute).

The code runs with a restricted set of builtins (no open, eval, exec, getattr, `__import__` but
an allow-listed importer, ...). Its `strategy(bars)` is called, the weights it returns are turned
into plain numbers in the same thread, checked by exact type in the main thread (`_plain`: no
method of the model's runs there), and one JSON line is written: `{"weights": {symbol: number}}`
or `{"error": "..."}`; then the process exits at once (`os._exit`: no finaliser, no `__del__` of
the model's objects runs after the answer).
"""

from __future__ import annotations

import builtins
import gc
import io
import json
import os
import resource
import sys
import types
import warnings
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
#: The file name the model's code is compiled under: the hook knows its frames by it.
_MODEL_FILE = "<strategy>"
#: Audit events allowed once armed, from any code: they change nothing outside the process.
_HARMLESS = frozenset(
    {
        "object.__setattr__",
        "object.__delattr__",
        "array.__new__",
        "time.sleep",
        "builtins.id",
        "sys.excepthook",
        "sys.unraisablehook",
    }
)
#: Audit events allowed once armed to library code only (see the module docstring).
_LIBRARY_ONLY = frozenset({"compile", "exec", "sys._getframe", "object.__getattr__"})
_MAX_ERROR_CHARS = 2000

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
    "open", "openpty", "pipe", "pipe2", "listdir", "scandir", "readlink", "stat", "lstat",
)  # fmt: skip


class _Hook:
    """The audit hook (see the module docstring); `armed` once the model's code may run."""

    def __init__(self) -> None:
        self.armed = False
        self._busy = False

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.armed or self._busy or event in _HARMLESS:
            return
        if event in _LIBRARY_ONLY and not self._from_model():
            return
        raise PermissionError(f"{event} is not allowed in the strategy sandbox")

    def _from_model(self) -> bool:
        """Whether the code that raised the event is the model's (its frame is two below:
        `_from_model`, the hook, then the code whose call raised the event)."""
        self._busy = True  # sys._getframe raises an event of its own
        try:
            return sys._getframe(2).f_code.co_filename == _MODEL_FILE
        finally:
            self._busy = False


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def _refused(*args: object, **kwargs: object) -> None:
    raise PermissionError("not allowed in the strategy sandbox")


def _neuter() -> None:
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


#: The model's thread, compiled into the model's own namespace: its frame, the bottom of every
#: frame walk from the model's code, has the model's globals and restricted builtins, and the
#: names it uses are its own (closure cells), so that no rebinding in the model's module changes
#: them. It turns the weights into plain `str` and `float` values, in this thread.
_ENTRY = """
def make(BaseException, Mapping, isinstance, type, str, float, limit):
    def entry(module, bars, answer, go, done):
        go.acquire()
        try:
            module()
            found = strategy(bars)
            if not isinstance(found, Mapping):
                raise TypeError(
                    f"strategy returned {type(found).__name__}, not a dict of weights"
                )
            weights = {}
            for symbol, weight in found.items():
                if not isinstance(symbol, str):
                    raise TypeError(f"weight keys must be symbols (str), got {symbol!r}")
                weights[str.__str__(symbol)] = float(weight)
            answer.append({"weights": weights})
        except BaseException as exc:
            try:
                text = f"{type(exc).__name__}: {exc}"
            except BaseException:
                text = f"{type(exc).__name__} (its message cannot be shown)"
            answer.append({"error": str.__str__(text[:limit])})
        finally:
            done.release()

    return entry
"""


def _entry(namespace: dict[str, Any]) -> Any:
    """The model thread's function, defined in `namespace` (see `_ENTRY`)."""
    exec(compile(_ENTRY, _MODEL_FILE, "exec"), namespace)  # noqa: S102
    make = namespace.pop("make")
    return make(BaseException, Mapping, isinstance, type, str, float, _MAX_ERROR_CHARS)


def _plain(answer: list[Any]) -> dict[str, object]:
    """The answer the model's thread left, checked by exact type (so that none of the model's
    methods runs in this thread), or an error."""
    for found in answer[:1]:
        if type(found) is not dict:
            break
        for key, value in list(found.items()):
            if type(key) is not str:
                break
            if key == "error" and type(value) is str:
                return {"error": value}
            if key == "weights" and type(value) is dict:
                pairs = list(value.items())
                if all(type(s) is str and type(w) is float for s, w in pairs):
                    return {"weights": dict(pairs)}
    return {"error": "the strategy gave no answer"}


def main() -> None:
    cpu_s, memory_mb = int(sys.argv[1]), int(sys.argv[2])
    if len(sys.argv) > 3:
        sys.path.append(sys.argv[3])
    _limit(resource.RLIMIT_CPU, cpu_s)
    _limit(resource.RLIMIT_AS, memory_mb * 1024 * 1024)
    _limit(resource.RLIMIT_FSIZE, 0)
    _limit(resource.RLIMIT_CORE, 0)
    hook = _Hook()
    sys.addaudithook(hook)
    request = json.loads(sys.stdin.read())
    import _thread
    import math  # noqa: F401  (imported before the file limit, for the strategy's imports)
    import statistics  # noqa: F401

    import numpy  # noqa: F401
    import pandas

    frames = _frames(request["bars"])
    repr(pandas.DataFrame({"x": [1.0]}, index=pandas.to_datetime(["2025-01-01"], utc=True)))
    out = sys.stdout
    null = os.open(os.devnull, os.O_RDONLY)
    sys.stdin.close()
    os.dup2(null, 0)
    os.close(null)
    _limit(resource.RLIMIT_NOFILE, 3)
    _neuter()
    gc.disable()
    warnings.simplefilter("ignore")
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    safe = {name: getattr(builtins, name) for name in _SAFE_BUILTINS}
    safe["__import__"] = _safe_import
    namespace: dict[str, Any] = {"__builtins__": safe, "__name__": "strategy_code"}
    answer: list[Any] = []
    try:
        module = types.FunctionType(compile(request["code"], _MODEL_FILE, "exec"), namespace)
    except (SyntaxError, ValueError) as exc:
        answer.append({"error": f"{type(exc).__name__}: {exc}"[:_MAX_ERROR_CHARS]})
    else:
        go, done = _thread.allocate_lock(), _thread.allocate_lock()
        go.acquire()
        done.acquire()
        _thread.start_new_thread(_entry(namespace), (module, frames, answer, go, done))
        hook.armed = True
        go.release()
        done.acquire()
    # Nothing of the model's is let go in this thread (its `__del__` would run here): the
    # process ends without collecting anything.
    out.write(json.dumps(_plain(answer)) + "\n")
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
