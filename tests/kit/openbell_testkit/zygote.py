"""The `openbell` console script forked from a warm process, for the acceptance tests.

Every `openbell` command a test runs as a subprocess spends most of its CPU importing (about a
second: SQLAlchemy and the tables, pyarrow, pydantic, the command line), and the suite runs some
six hundred of them. So by default a test worker keeps two *zygotes*: Python processes started
once (`python -m openbell_testkit.zygote SOCKET`) that import the command line and what its
commands run on, then wait. `launch` asks one of them (in turns) to fork; the child becomes the
command, as a fresh process would be:

- its stdin, stdout and stderr are the caller's (passed over the socket), its working directory
  and `os.environ` are the request's, `sys.argv` is the console script's;
- SIGINT, SIGTERM and SIGCHLD are as Python sets them at start (SIGINT ignored if the caller had it
  ignored, as a shell's background job);
- it runs the console script's command (`openbell.ops.entry.main`) and ends as the console script
  does (`openbell.ops.entry.run`): non-daemon threads joined, `atexit` run, the streams flushed,
  the modules not cleared, the exit code (or the signal) reported to the caller, which sees it as
  `Popen.returncode`;
- numpy was loaded with one OpenBLAS thread, as the console script loads it;
- Python reseeds `random` after a fork; the two zygotes have different hash seeds, so two
  commands in a row never share one (a set's order differs between them as between fresh runs).

What differs from a fresh process is what was imported before the command started, and
`/proc/<pid>/cmdline` and `/proc/<pid>/environ` (the zygote's). Hence a fresh process is started
instead (`launch` returns a `subprocess.Popen`):

- when the request's environment differs from the zygotes' in a variable read as a process
  starts (`STARTUP_VARIABLES`: Python's own, the locale, the home and XDG folders, the dynamic
  loader, malloc and the BLAS thread pools); other variables (an API key, `COLUMNS`,
  `NOTIFY_SOCKET`, `TZ`, which the child applies with `time.tzset`) are set in the child's
  `os.environ` as a fresh process would read them;
- for the tests marked `fresh_processes` (start-up, imports, jails and the attacks that read a
  process's `/proc` entries for a secret given in its environment: `tests/conftest.py` sets
  `FRESH` for them);
- everywhere with `OPENBELL_TEST_FRESH_PROCESSES=1`.

Imports before the command are checked elsewhere, in fresh processes: `test_start_imports.py`
reads what a replay and the leaderboard import, `test_startup_stop.py` stops a daemon during its
imports. A zygote whose imports print anything refuses to start (a warning at import would
otherwise vanish from every command's stderr).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import itertools
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

#: Set by `tests/conftest.py` for a test marked `fresh_processes`.
FRESH = threading.Event()
FRESH_ENV = "OPENBELL_TEST_FRESH_PROCESSES"
#: The variables read as a process starts (by the interpreter, the C library or a library at its
#: import): a command whose environment differs from its zygote's in one runs as a fresh process.
STARTUP_VARIABLES = frozenset({"HOME", "LANG", "LANGUAGE"})
STARTUP_PREFIXES = ("PYTHON", "LC_", "LD_", "MALLOC_", "OPENBLAS", "OMP_", "MKL_", "XDG_", "ARROW_")
#: What a zygote imports before it waits: the command line, every command's module, and what the
#: commands run on (the replay, the live daemon, the reports, the ledger, the web app).
PRELOAD = (
    "openbell.ops.cli",
    "openbell.ops.wiring.planning",
    "openbell.daemon.replay",
    "openbell.daemon.live",
    "openbell.daemon.scheduler",
    "openbell.agents.baselines",
    "openbell.agents.llm",
    "openbell.ops.reports.market_reports",
    "openbell.ops.web.app",
    "openbell.store.db",
    "openbell.store.tables",
    "openbell.store.migrate",
    "openbell.store.verify",
    "sqlalchemy.dialects.postgresql",
    "psycopg",
    "pyarrow.parquet",
    "numpy",
    "rich.console",
    "rich.table",
)
START_TIMEOUT_S = 120.0
#: The socket's own `connect`, taken at import: a test that refuses the network in its process
#: (`offline.refuse_network` patches `socket.socket.connect`) still reaches its zygotes, as it still
#: starts fresh processes (the patch never reaches a child either way).
_CONNECT = socket.socket.connect
_HEADER = 8  # bytes of a request's length


# -- the zygote ----------------------------------------------------------------------------------


def _preload() -> str:
    """Import PRELOAD (and every command's module) with fds 1 and 2 caught; what they printed."""
    import importlib
    import pkgutil

    from openbell.ops.entry import NumpyWithOneBlasThread, StructlogWithoutRich

    caught = tempfile.TemporaryFile()  # noqa: SIM115  (read back below, closed with the zygote)
    saved = os.dup(1), os.dup(2)
    os.dup2(caught.fileno(), 1)
    os.dup2(caught.fileno(), 2)
    try:
        StructlogWithoutRich.install()
        NumpyWithOneBlasThread.install()  # as the console script loads it
        for name in PRELOAD:
            module = importlib.import_module(name)
            if name == "openbell.ops.cli":
                for info in pkgutil.iter_modules(module.__path__, f"{name}."):
                    if not info.name.endswith("__main__"):
                        importlib.import_module(info.name)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
    caught.seek(0)
    return caught.read().decode(errors="replace")


def serve(path: str) -> None:
    """Import, say `ready` on stdout (or what the imports printed, and exit 1), then fork a child
    for each request on the Unix socket at `path` until the parent process goes."""
    parent = os.getppid()
    printed = _preload()
    if printed:
        print(f"the zygote's imports printed: {printed!r}", flush=True)
        sys.exit(1)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    woken_r, woken_w = os.pipe()
    os.set_blocking(woken_w, False)
    signal.set_wakeup_fd(woken_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    print("ready", flush=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    children: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(woken_r, selectors.EVENT_READ)
    while os.getppid() == parent:
        for key, _ in selector.select(timeout=1.0):
            if key.fileobj is listener:
                connection, _ = listener.accept()
                pid = _fork(connection, listener, children, (woken_r, woken_w))
                if pid is not None:
                    children[pid] = connection
            else:
                with contextlib.suppress(BlockingIOError):
                    os.read(woken_r, 512)
        _reap(children)


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = children.pop(pid, None)
        if connection is not None:
            with contextlib.suppress(OSError):
                connection.sendall(json.dumps({"status": status}).encode() + b"\n")
            connection.close()


def _receive(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    header, fds, _, _ = socket.recv_fds(connection, _HEADER, 3)
    size = int.from_bytes(header, "big")
    body = b""
    while len(body) < size:
        chunk = connection.recv(size - len(body))
        if not chunk:
            raise ConnectionError("the request was cut short")
        body += chunk
    return json.loads(body), fds


def _fork(
    connection: socket.socket,
    listener: socket.socket,
    children: Mapping[int, socket.socket],
    wakeup: tuple[int, int],
) -> int | None:
    try:
        request, fds = _receive(connection)
    except (OSError, ValueError):
        connection.close()
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)
        for fd in wakeup:
            os.close(fd)
        listener.close()
        for other in children.values():
            other.close()
        connection.close()
        _become(request, fds)  # never returns
    for fd in fds:
        os.close(fd)
    with contextlib.suppress(OSError):
        connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    return pid


def _become(request: dict[str, Any], fds: Sequence[int]) -> None:
    """In the forked child: take the request's stdio, directory, environment and arguments, run
    the console script's entry and exit as the interpreter would."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        ignored = request["sigint_ignored"]
        signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        sys.argv = list(request["argv"])
        code = _run_entry()
        threading._shutdown()  # type: ignore[attr-defined]  # joined as at the interpreter's exit
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                code = code or 120
        os._exit(code)


def _run_entry() -> int:
    from openbell.ops.entry import main

    try:
        return _exit_code(main())
    except SystemExit as exc:
        return _exit_code(exc.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        sys.stderr.flush()
        # As CPython ends on an uncaught KeyboardInterrupt: killed by SIGINT.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        return 130
    except BaseException:  # noqa: BLE001  (printed and exit 1, as the interpreter does)
        sys.excepthook(*sys.exc_info())
        return 1


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


# -- the caller's side ---------------------------------------------------------------------------


class ForkedProcess:
    """A command forked by a zygote, with the part of `subprocess.Popen`'s interface the tests
    use: `pid`, `args`, `returncode`, `stdout`, `stderr` (text, universal newlines), `poll`,
    `wait`, `communicate`, `send_signal`, `terminate`, `kill`."""

    def __init__(
        self, args: list[str], connection: socket.socket, stdout: IO[str], stderr: IO[str]
    ) -> None:
        self.args = args
        self.stdout: IO[str] | None = stdout
        self.stderr: IO[str] | None = stderr
        self.returncode: int | None = None
        self._connection = connection
        self._reader = connection.makefile("rb")
        self.pid = int(json.loads(self._reader.readline())["pid"])

    def _take_status(self) -> None:
        line = self._reader.readline()
        self._reader.close()
        self._connection.close()
        if not line:  # the zygote went away: the command's status is lost
            self.returncode = -signal.SIGKILL
            return
        status = json.loads(line)["status"]
        self.returncode = os.waitstatus_to_exitcode(status)

    def poll(self) -> int | None:
        if self.returncode is None and selectors_readable(self._connection, 0.0):
            self._take_status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not selectors_readable(self._connection, timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._take_status()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Read stdout and stderr to their ends and wait; TimeoutExpired (the command still
        running) after `timeout` seconds."""
        read: dict[str, str] = {}
        readers = [
            threading.Thread(target=_read_all, args=(stream, name, read), daemon=True)
            for name, stream in (("stdout", self.stdout), ("stderr", self.stderr))
        ]
        for reader in readers:
            reader.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return read.get("stdout", ""), read.get("stderr", "")


def _read_all(stream: IO[str] | None, name: str, into: dict[str, str]) -> None:
    if stream is not None:
        into[name] = stream.read()
        stream.close()


def selectors_readable(connection: socket.socket, timeout: float | None) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(connection, selectors.EVENT_READ)
        return bool(selector.select(timeout))


class _Zygote:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="openbell-zygote-")
        self.path = str(Path(self.folder) / "socket")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "openbell_testkit.zygote", self.path],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.folder,
        )
        assert self.process.stdout is not None
        said = _read_line(self.process.stdout, START_TIMEOUT_S)
        if said.strip() != b"ready":
            self.close()
            raise RuntimeError(f"an openbell zygote did not start: {said.decode(errors='replace')}")

    def fork(self, argv: list[str], cwd: Path, env: Mapping[str, str]) -> ForkedProcess:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            _CONNECT(connection, self.path)
            body = json.dumps(
                {
                    "argv": argv,
                    "cwd": str(Path(cwd).resolve()),
                    "env": dict(env),
                    "sigint_ignored": signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
                }
            ).encode()
            socket.send_fds(connection, [len(body).to_bytes(_HEADER, "big")], [0, out_w, err_w])
            connection.sendall(body)
        except BaseException:
            connection.close()
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        encoding = locale.getpreferredencoding(False)
        stdout = io.TextIOWrapper(io.FileIO(out_r, "rb"), encoding=encoding)
        stderr = io.TextIOWrapper(io.FileIO(err_r, "rb"), encoding=encoding)
        return ForkedProcess(argv, connection, stdout, stderr)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()
        with contextlib.suppress(OSError):
            Path(self.path).unlink()
        with contextlib.suppress(OSError):
            Path(self.folder).rmdir()


def _read_line(stream: IO[bytes], timeout_s: float) -> bytes:
    said: list[bytes] = []
    reader = threading.Thread(target=lambda: said.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    return said[0] if said else b"(no answer within the start timeout)"


class Zygotes:
    """Two zygotes started (lazily) with `env`, forked from in turns; closed at exit."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self._zygotes: list[_Zygote] = []
        self._turns = itertools.count()
        self._lock = threading.Lock()

    def serves(self, env: Mapping[str, str]) -> bool:
        """Whether a command with `env` would start as the zygotes did (`STARTUP_VARIABLES`)."""
        return _startup(env) == _startup(self.env)

    def fork(self, argv: list[str], cwd: Path, env: Mapping[str, str]) -> ForkedProcess:
        with self._lock:
            if not self._zygotes:
                self._zygotes = [_Zygote(self.env), _Zygote(self.env)]
                atexit.register(self.close)
            zygote = self._zygotes[next(self._turns) % len(self._zygotes)]
        return zygote.fork(argv, cwd, env)

    def close(self) -> None:
        with self._lock:
            for zygote in self._zygotes:
                zygote.close()
            self._zygotes = []


def _startup(env: Mapping[str, str]) -> dict[str, str]:
    return {
        k: v for k, v in env.items() if k in STARTUP_VARIABLES or k.startswith(STARTUP_PREFIXES)
    }


def forking_available() -> bool:
    return hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform == "linux"


if __name__ == "__main__":
    serve(sys.argv[1])
