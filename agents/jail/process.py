"""Starting a program in its jail (or, where the operator allowed it, as a plain subprocess),
reading what it prints within bounds, and ending it with everything it started.

This module owns `start`, which runs a command line, jailed by bubblewrap (`bwrap.py`) or not,
as an asyncio subprocess in its own session, and `Sandboxed`, the handle that ends it:

- `terminate` asks politely: SIGTERM to every process in the jail (each descendant of bwrap but
  bwrap's own init, found in `/proc`; `setsid` grandchildren are the init's children by then), or
  to the plain subprocess's process group; then it waits up to a grace time for the program.
- `kill` does not ask: SIGKILL to bwrap, whose init is SIGKILLed with it (`--die-with-parent`),
  and the kernel then kills everything left in the jail's PID namespace; also SIGKILL to the
  process group, for a plain subprocess (a grandchild that called `setsid` escapes that one: only
  the jail holds it).
- A daemon that dies without asking (SIGKILL, OOM) takes its jails with it: the child arms its
  parent-death signal (SIGKILL) before it execs bwrap, and exits at once if the daemon is gone
  already. bwrap's own `--die-with-parent` is armed only once bwrap runs, so without this a
  daemon killed in bwrap's first moments left the jail running (seen on a loaded machine).

`Capture` keeps the first bytes of an output stream and counts the rest (the stream is drained,
so the program never blocks on a full pipe). `shown` is how any text that comes back from a
sandboxed run is let out to the model, a trace or a log: cut to a bound, then masked by the run's
`Redactor` (every configured secret, in every form it knows).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

from openbell.agents.jail.bwrap import Features, Jail, options
from openbell.store.redact import Redactor

_PIPE: Final = asyncio.subprocess.PIPE
#: bwrap's exit status for a program killed by signal N is this plus N.
_SIGNALLED: Final = 128
#: prctl's option that sets the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG: Final = 1
Stdin = int | IO[bytes] | None


@dataclass(slots=True)
class Sandboxed:
    """A started program; `jailed` says whether bubblewrap holds it."""

    process: asyncio.subprocess.Process
    jailed: bool

    @property
    def pid(self) -> int:
        """bwrap's pid (jailed), or the program's."""
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """How the program ended, as asyncio says it: its exit status, or minus the signal
        that killed it. bwrap exits with 128 + N for a program killed by signal N: that is
        read as -N (as is a program that exited with such a status itself)."""
        code = self.process.returncode
        if self.jailed and code is not None and code > _SIGNALLED:
            return _SIGNALLED - code
        return code

    async def terminate(self, grace_s: float) -> None:
        """SIGTERM to what runs inside, then wait up to `grace_s` for the program to end."""
        if self.process.returncode is not None:
            return
        if self.jailed:
            for pid in _inside(self.process.pid):
                _signal(pid, signal.SIGTERM)
        else:
            _signal_group(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), grace_s)

    async def kill(self) -> None:
        """SIGKILL to the program and everything it started (see the module docstring). A
        jail whose bwrap has ended is gone already (its PID is not signalled: it may be reused);
        its process group, which a plain program's grandchildren may still hold, always is."""
        if self.jailed and self.process.returncode is None:
            _signal(self.process.pid, signal.SIGKILL)
        _signal_group(self.process.pid, signal.SIGKILL)
        await self.process.wait()


async def start(
    argv: Sequence[str],
    *,
    jail: tuple[Jail, Features] | None,
    stdin: Stdin,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Sandboxed:
    """Start `argv` in `jail` (the jail and the bwrap that makes it), or, with None, as a plain
    subprocess with `env` in `cwd`; stdout and stderr piped, in a new session. `OSError` when it
    cannot be started.

    bwrap gets its options through a memory file (`--args FD`), so that neither the jail's
    environment nor its mounts are in any command line `/proc` shows, and an empty environment
    of its own: the daemon's is nowhere in the jail, not even in bwrap's init."""
    if jail is None:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=stdin,
            stdout=_PIPE,
            stderr=_PIPE,
            env=dict(env or {}),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_dies_with(os.getpid()),
        )
        return Sandboxed(process=process, jailed=False)
    settings, found = jail
    blob = "".join(option + "\0" for option in options(settings, found)).encode()
    descriptor = os.memfd_create("bwrap-options")
    try:
        os.write(descriptor, blob)
        os.lseek(descriptor, 0, os.SEEK_SET)
        process = await asyncio.create_subprocess_exec(
            found.path,
            "--args",
            str(descriptor),
            "--",
            *argv,
            stdin=stdin,
            stdout=_PIPE,
            stderr=_PIPE,
            env={},
            pass_fds=(descriptor,),
            start_new_session=True,
            preexec_fn=_dies_with(os.getpid()),
        )
    finally:
        os.close(descriptor)
    return Sandboxed(process=process, jailed=True)


def _dies_with(parent: int) -> Callable[[], None]:
    """What the forked child runs before its exec: SIGKILL when `parent` dies, and no exec at
    all if it has died already (the child was reparented). Only a bound C call and two syscalls
    run between fork and exec."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    kill = int(signal.SIGKILL)

    def arm() -> None:
        if prctl(_PR_SET_PDEATHSIG, kill, 0, 0, 0) != 0 or os.getppid() != parent:
            os._exit(127)

    return arm


def _inside(bwrap_pid: int) -> list[int]:
    """The processes in a jail: bwrap's descendants but its own init (its one child)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        parent = _parent(int(entry.name))
        if parent is not None:
            children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    pending = [
        grandchild for init in children.get(bwrap_pid, []) for grandchild in children.get(init, [])
    ]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, []))
    return found


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The name (2nd field) may hold spaces and parentheses: the fields after it follow the last ")".
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[1]) if len(fields) > 1 else None


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


@dataclass(slots=True)
class Capture:
    """The first `limit` bytes of one output stream, and how many more there were."""

    limit: int
    kept: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    async def drain(self, stream: asyncio.StreamReader | None) -> None:
        """Read `stream` to its end, keeping the first `limit` bytes."""
        if stream is None:
            raise RuntimeError("the program's output is not piped")
        while chunk := await stream.read(65_536):
            room = max(self.limit - len(self.kept), 0)
            self.kept += chunk[:room]
            self.dropped += max(len(chunk) - room, 0)

    def text(self) -> str:
        """What was kept, as text, with a note of what was not."""
        shown = self.kept.decode("utf-8", errors="replace")
        return shown + (f"\n... [cut: {self.dropped} more bytes]" if self.dropped else "")


def shown(text: str, redactor: Redactor, limit: int) -> str:
    """`text` as it may leave a sandboxed run: its first `limit` characters (with a note of the
    cut), every configured secret and credential-looking text masked."""
    if len(text) > limit:
        text = f"{text[:limit]}... [cut: {len(text)} characters]"
    return redactor.mask(text)
