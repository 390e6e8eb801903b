"""The bubblewrap (`bwrap`) command line of a jail, and the one probe of whether it works here.

This module owns `Jail`, what a sandboxed process sees, and `command_line`, which turns a jail
and a program's arguments into a `bwrap` command line. Every jail has:

- new user, PID, IPC and UTS namespaces, and a new network namespace (only a loopback of its own)
  unless `network`: a jail that keeps the network shares the daemon's, loopback included;
- inside, uid and gid 65534 (`nobody`), mapped to the daemon's own outside; no capability
  (`--cap-drop ALL`, which matters when the daemon runs as root) and, where bubblewrap and the
  kernel allow it (`disable_userns`), no further user namespace (`--disable-userns`);
- a new mount namespace whose root is an empty tmpfs holding only the jail's `mounts`, a fresh
  `/dev` (null, zero, full, random, urandom, tty, pts, shm), a private `/tmp` tmpfs of `tmp_mb`
  and, with `proc`, the jail's own `/proc` (its PID namespace: none of the daemon's processes);
- `--die-with-parent` (everything in the jail is SIGKILLed when bwrap or the daemon dies),
  `--new-session` (no controlling terminal to push input into) and `--clearenv` (only `env`).

When its PID namespace's first process (bwrap's own init) ends, the kernel kills every process
left in the namespace: whatever a jailed program starts, `setsid` grandchildren included, cannot
outlive it.

`probe` runs a jailed command once and says why it failed, if it did; `features` reads which
options this bubblewrap has. The callers (`python_jail`, `command_jail`) cache what they find.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Final, Literal

#: The uid and gid inside every jail (`nobody`).
JAIL_UID: Final = 65534
#: How long a probe may take, in seconds (a first start reads the interpreter from disk).
PROBE_TIMEOUT_S: Final = 30.0

MountKind = Literal["ro", "rw", "symlink", "tmpfs", "dir"]
_OPTION: Final[dict[MountKind, str]] = {
    "ro": "--ro-bind",
    "rw": "--bind",
    "symlink": "--symlink",
    "tmpfs": "--tmpfs",
    "dir": "--dir",
}


@dataclass(frozen=True, slots=True)
class Mount:
    """One mount of a jail, in order: `ro` and `rw` bind `source` (a host path) at `target`,
    `symlink` makes `target` a link to `source`, `tmpfs` and `dir` make an empty directory."""

    kind: MountKind
    target: str
    source: str = ""

    def __post_init__(self) -> None:
        if not self.target.startswith("/"):
            raise ValueError(f"a mount's target must be absolute, got {self.target!r}")
        if self.kind in ("ro", "rw", "symlink") and not self.source:
            raise ValueError(f"a {self.kind} mount needs a source")

    def options(self) -> list[str]:
        """The bwrap options of this mount."""
        if self.kind in ("tmpfs", "dir"):
            return [_OPTION[self.kind], self.target]
        return [_OPTION[self.kind], self.source, self.target]


@dataclass(frozen=True, slots=True, kw_only=True)
class Jail:
    """What a jailed process sees; see the module docstring."""

    mounts: tuple[Mount, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = "/"
    network: bool = False
    proc: bool = False
    disable_userns: bool = True
    tmp_mb: int = 64

    def __post_init__(self) -> None:
        if self.tmp_mb <= 0:
            raise ValueError(f"tmp_mb must be positive, got {self.tmp_mb}")

    def visible(self) -> tuple[str, ...]:
        """The host paths bound into the jail, in order."""
        return tuple(m.source for m in self.mounts if m.kind in ("ro", "rw"))


@dataclass(frozen=True, slots=True)
class Features:
    """What this bubblewrap can do: its path and the newer options it knows."""

    path: str
    size: bool = False
    disable_userns: bool = False


@cache
def features() -> Features | None:
    """The `bwrap` on `PATH` and its options; None when there is none (read once)."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    try:
        shown = subprocess.run(  # noqa: S603  (our own fixed command line)
            [path, "--help"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    usage = shown.stdout + shown.stderr
    return Features(path=path, size="--size" in usage, disable_userns="--disable-userns" in usage)


def command_line(jail: Jail, argv: Sequence[str], found: Features) -> list[str]:
    """The bwrap command line that runs `argv` in `jail`, with the bwrap of `found` (what
    `process.start` runs passes `options` through a file descriptor instead)."""
    if not argv:
        raise ValueError("a jailed command needs a program")
    return [found.path, *options(jail, found), "--", *argv]


def options(jail: Jail, found: Features) -> list[str]:
    """The bwrap options that make `jail` (see the module docstring)."""
    line = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        *([] if jail.network else ["--unshare-net"]),
        "--uid",
        str(JAIL_UID),
        "--gid",
        str(JAIL_UID),
        "--cap-drop",
        "ALL",
        *(["--disable-userns"] if jail.disable_userns and found.disable_userns else []),
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--dev",
        "/dev",
        *(["--proc", "/proc"] if jail.proc else []),
        *(["--size", str(jail.tmp_mb * 1024 * 1024)] if found.size else []),
        "--tmpfs",
        "/tmp",  # noqa: S108  (the jail's own, empty tmpfs)
    ]
    for mount in jail.mounts:
        line += mount.options()
    for name, value in sorted(jail.env.items()):
        line += ["--setenv", name, value]
    line += ["--chdir", jail.cwd]
    return line


def probe(jail: Jail, argv: Sequence[str], found: Features) -> str | None:
    """Run `argv` in `jail` once; None when it exited 0, else why not (one line)."""
    try:
        ran = subprocess.run(  # noqa: S603  (a fixed jail and command)
            command_line(jail, argv, found),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"a trial run in bubblewrap took more than {PROBE_TIMEOUT_S:g} s"
    except OSError as exc:
        return f"bubblewrap could not be started: {exc.strerror or exc}"
    if ran.returncode == 0:
        return None
    said = " ".join((ran.stderr or ran.stdout).split())[:300] or "no message"
    return f"a trial run in bubblewrap failed (exit status {ran.returncode}): {said}"


@dataclass(frozen=True, slots=True)
class Support:
    """Whether a kind of jail works here: the first of its variants that ran a trial (`jail`,
    with the bwrap `found`), or None and why the first variant failed (`reason`)."""

    jail: Jail | None
    found: Features | None = None
    reason: str = ""


#: Why there is no jail when there is no bubblewrap.
NOT_INSTALLED: Final = (
    "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap; `make install` "
    "installs it when run as root)"
)


def settle(variants: Sequence[Jail], argv: Sequence[str]) -> Support:
    """The first of `variants` (from the most to the least locked down) in which `argv` runs."""
    found = features()
    if found is None:
        return Support(None, reason=NOT_INSTALLED)
    first = ""
    for jail in variants:
        why = probe(jail, argv, found)
        if why is None:
            return Support(jail, found)
        first = first or why
    return Support(None, found, reason=first)
