"""The jail a launched command (an agent of `kind = "command"`) runs in.

This module owns `command_jail`: the `Jail` (`bwrap.py`) of one cycle of one command. It keeps
the daemon's network (the command needs its model's API and openbell's MCP endpoint on
loopback) and gives the command, read-only unless said otherwise:

- the system: `/usr`, `/bin`, `/sbin`, `/lib*` as the host has them (links stay links), and of
  `/etc` only what programs need to run and reach a server (`ETC`: users and groups, name
  resolution, TLS certificates, time zone, the dynamic loader's cache, alternatives): never the
  daemon's configuration (`/etc/openbell`) or any other file there;
- the program (`argv[0]`, looked up on the command's `PATH`) and what it needs: its directory,
  and the directory it links to; a virtual environment it belongs to (a `pyvenv.cfg` beside its
  `bin`) and that environment's base interpreter's installation; the installation (`PREFIX/bin`
  with `PREFIX/lib`) outside the system directories of a program or of its `#!` interpreter;
- the same for the MCP relay (`openbell mcp`, named in `.mcp.stdio.json`), and openbell's own
  packages where they really are (an editable install links them from its source tree);
- every argument that is an absolute path to an existing file or directory (`python
  /srv/agent.py`), and the configured `read_paths`;
- the cycle's working directory, the only place it can write (besides its own `/tmp`), which is
  also its `HOME`.

No bind may show a `protected` path (the ledger file, the daemon's working directory): a program,
argument or `read_paths` entry at or above one is a `ConfigError`. Neither the daemon's `/proc`
nor its other processes, files or state are visible: the jail has its own PID namespace and, where
the kernel lets a fresh one be mounted (not under the systemd unit's `ProtectProc`), its own
`/proc`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Final

from openbell.agents.jail.bwrap import Jail, Mount, Support, settle
from openbell.agents.jail.python_jail import host_path
from openbell.markets.errors import ConfigError

#: The system directories every command sees (read-only, links kept as links).
SYSTEM: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What of `/etc` a command sees: enough to run programs and reach a server over TLS.
ETC: Final = (
    "passwd", "group", "nsswitch.conf", "hosts", "host.conf", "resolv.conf", "gai.conf",
    "services", "protocols", "localtime", "timezone", "ld.so.cache", "ld.so.conf",
    "ld.so.conf.d", "ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
    "alternatives", "mime.types", "os-release", "debian_version",
)  # fmt: skip


def command_jail(
    *,
    argv: Sequence[str],
    workdir: Path,
    env: Mapping[str, str],
    relay: Sequence[str] = (),
    read_paths: Iterable[str] = (),
    protected: Iterable[Path] = (),
    base: Jail | None = None,
) -> tuple[Jail, str]:
    """The jail of one cycle of `argv` in `workdir` (see the module docstring) and the path of
    the program to run in it. `base` is the probed jail (`command_support`), whose `/proc` and
    user-namespace settings it keeps. `ConfigError` when the program cannot be found or a bind
    would show a protected path."""
    path = env.get("PATH", os.defpath)
    program = _found(argv[0], path)
    shown: list[Path] = [*_program(program, path)]
    if relay and _findable(relay[0], path):
        shown += _program(_found(relay[0], path), path)
        shown += _openbell_packages()
    shown += [Path(arg) for arg in argv[1:] if _existing_absolute(arg)]
    for entry in read_paths:
        if not os.path.isabs(entry) or not os.path.exists(entry):
            raise ConfigError(f"read_paths: {entry!r} is not an absolute path that exists")
        shown.append(Path(entry))
    _check_protected(shown, [Path(p) for p in protected])
    mounts = [*_system(), *_binds(shown), Mount("rw", str(workdir), source=str(workdir))]
    inside_env = {**env, "HOME": str(workdir), "TMPDIR": "/tmp"}  # noqa: S108  (the jail's own)
    settings = base if base is not None else Jail(mounts=())
    jail = replace(
        settings, mounts=tuple(mounts), env=inside_env, cwd=str(workdir), network=True, tmp_mb=512
    )
    return jail, str(program)


@cache
def command_support() -> Support:
    """Whether command jails work here (probed once): the most locked-down variant that runs
    `true` (its own `/proc` and no nested user namespace if possible)."""
    true = shutil.which("true") or "/usr/bin/true"
    mounts = tuple(_system())
    variants = [
        Jail(mounts=mounts, network=True, proc=proc, disable_userns=disable)
        for disable in (True, False)
        for proc in (True, False)
    ]
    return settle(variants, [true])


def _system() -> Iterator[Mount]:
    for path in SYSTEM:
        yield from host_path(path)
    for name in ETC:
        etc = f"/etc/{name}"
        if os.path.exists(etc):
            yield Mount("ro", etc, source=etc)
    for found in sorted(Path("/etc").glob("python3*")):
        yield Mount("ro", str(found), source=str(found))


def _findable(name: str, path: str) -> bool:
    return shutil.which(name, path=path) is not None


def _found(name: str, path: str) -> Path:
    found = shutil.which(name, path=path)
    if found is None:
        raise ConfigError(f"cannot start {name!r}: no such program on the command's PATH")
    return Path(found).absolute()


def _program(program: Path, path: str) -> Iterator[Path]:
    """What running `program` needs beyond the system (see the module docstring)."""
    yield from _installation(program)
    interpreter = _shebang(program, path)
    if interpreter is not None:
        yield from _installation(interpreter)


def _installation(program: Path) -> Iterator[Path]:
    for candidate in dict.fromkeys((program, program.resolve())):
        directory = candidate.parent
        if _is_system(directory):
            continue
        yield directory
        root = directory.parent
        venv = root / "pyvenv.cfg"
        if venv.is_file():
            yield root
            home = _venv_home(venv)
            if home is not None and not _is_system(home):
                yield home.parent
        elif (root / "lib").is_dir() and directory.name == "bin":
            yield root


def _venv_home(config: Path) -> Path | None:
    for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return Path(value.strip()).resolve()
    return None


def _shebang(program: Path, path: str) -> Path | None:
    """The interpreter a `#!` script names (the program `env` starts, looked up, for
    `#!/usr/bin/env NAME`), or None."""
    try:
        with program.open("rb") as file:
            first = file.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env" and len(words) > 1:
        found = shutil.which(words[1], path=path)
        return Path(found) if found is not None else None
    return Path(words[0])


def _openbell_packages() -> Iterator[Path]:
    """openbell's packages as installed here, and where their files really are (an editable
    install's `build/` links each file from the source tree)."""
    installed = Path(__file__).parents[2]  # .../openbell
    yield installed
    for package in sorted(installed.iterdir()):
        init = package / "__init__.py"
        if init.exists():
            yield init.resolve().parent


def _is_system(directory: Path) -> bool:
    """Whether `directory` is visible anyway, through `SYSTEM`."""
    text = str(directory)
    return any(text == s or text.startswith(s + "/") for s in SYSTEM)


def _existing_absolute(arg: str) -> bool:
    return os.path.isabs(arg) and os.path.exists(arg)


def _check_protected(shown: Iterable[Path], protected: Sequence[Path]) -> None:
    for path in shown:
        visible = path.absolute()
        for secret in protected:
            if secret.absolute() == visible or visible in secret.absolute().parents:
                raise ConfigError(
                    f"{visible} would be visible to the command, and it holds {secret}: "
                    "move the program or the path elsewhere"
                )


def _binds(paths: Iterable[Path]) -> Iterator[Mount]:
    """Read-only binds of `paths`, each once, a path inside an earlier one left out."""
    done: list[str] = []
    for path in sorted({str(p.absolute()) for p in paths}, key=len):
        if any(path == d or path.startswith(d.rstrip("/") + "/") for d in done):
            continue
        done.append(path)
        yield Mount("ro", path, source=path)
