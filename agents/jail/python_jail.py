"""The jail a Python script runs in with only the standard library and a few allowed packages.

This module owns `python_jail`: the `Jail` (`bwrap.py`) and the command line that run one script
of openbell's (the strategy child, `strategy_code/child.py`) in the interpreter running openbell,
seeing no more than it needs, all read-only:

- the system's shared libraries (`/usr/lib`, `/usr/lib64`, ..., and `/lib*` as the host has them,
  links or directories) and `/etc/ld.so.cache`: no program, no other file of `/etc`;
- the interpreter itself (`sys.executable` resolved: a venv's `python` is a link to its base
  interpreter), its `libpython` when it is shared, and its standard library (`sys.base_prefix`'s,
  resolved), over whose own `site-packages` an empty tmpfs is mounted;
- the allowed packages (`packages`, numpy and pandas) and every distribution they require (their
  `Requires-Dist` closure, with environment markers evaluated and no extras), each top-level
  module or directory of each bound at `SITE/<name>` (`SITE` is `/sandbox/site`), wherever it is
  installed: not the rest of the venv, not openbell, not the project tree;
- the script, at `/sandbox/<its name>`.

No network, no `/proc` (the script needs none, and the systemd unit's `ProtectProc` and
`ProtectKernelTunables` would refuse mounting one), nothing of the daemon's state, configuration,
home or other processes. The interpreter runs with `-I -S -B`: isolated (no environment variable,
no user site), no `site` (nothing but the standard library on its path until the script adds
`SITE`), no bytecode written. The environment is `env` only.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Final

from packaging.requirements import InvalidRequirement, Requirement

from openbell.agents.jail.bwrap import Jail, Mount

#: Where the allowed packages are, inside the jail.
SITE: Final = "/sandbox/site"
#: Where the script is, inside the jail.
SCRIPT_DIR: Final = "/sandbox"
#: Library directories bound when they exist (a link, as on merged-/usr systems, stays a link).
LIBRARY_DIRS: Final = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32")
ROOT_LINKS: Final = ("/lib", "/lib64", "/lib32", "/libx32")
_SKIPPED_TOPS: Final = ("..", "__pycache__")


@dataclass(frozen=True, slots=True, kw_only=True)
class PythonJail:
    """A jail with its interpreter and script (see the module docstring): `argv(*args)` is the
    command line that runs the script with `args` in it."""

    jail: Jail
    python: str
    script: str

    def argv(self, *args: str) -> list[str]:
        """The interpreter's command line inside the jail."""
        return [self.python, "-I", "-S", "-B", self.script, *args]


def python_jail(
    script: Path, *, packages: Sequence[str], env: Mapping[str, str] | None = None
) -> PythonJail:
    """The jail that runs `script` with the standard library and `packages` (see the module
    docstring); `LookupError` when a package is not installed."""
    python = Path(sys.executable).resolve()
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    mounts: list[Mount] = list(_system_libraries())
    mounts.append(Mount("ro", str(python), str(python)))
    shared = _libpython()
    if shared is not None:
        mounts.append(Mount("ro", str(shared), str(shared)))
    mounts.append(Mount("ro", str(stdlib), str(stdlib)))
    if (stdlib / "site-packages").is_dir():
        mounts.append(Mount("tmpfs", str(stdlib / "site-packages")))
    for name, path in sorted(package_files(packages).items()):
        mounts.append(Mount("ro", f"{SITE}/{name}", source=str(path)))
    inside = f"{SCRIPT_DIR}/{script.name}"
    mounts.append(Mount("ro", inside, source=str(script.resolve())))
    return PythonJail(
        jail=Jail(mounts=tuple(_deduplicated(mounts)), env=dict(env or {}), tmp_mb=16),
        python=str(python),
        script=inside,
    )


def package_files(packages: Iterable[str]) -> dict[str, Path]:
    """The top-level modules and directories of `packages` and of every distribution they
    require, by name; `LookupError` naming a package that is not installed."""
    found: dict[str, Path] = {}
    for dist in _closure(packages):
        for name in _tops(dist):
            found.setdefault(name, Path(str(dist.locate_file(name))).resolve())
    return found


def _closure(packages: Iterable[str]) -> Iterator[metadata.Distribution]:
    """Each installed distribution of `packages` and of their requirements, once."""
    seen: set[str] = set()
    pending = list(packages)
    while pending:
        name = _canonical(pending.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise LookupError(f"the package {name!r} is not installed") from None
        yield dist
        pending.extend(_required(dist))


def _required(dist: metadata.Distribution) -> Iterator[str]:
    """The distributions `dist` requires here (markers evaluated, extras left out)."""
    for line in dist.requires or ():
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        marker = requirement.marker
        if marker is None or marker.evaluate({"extra": ""}):
            yield requirement.name


def _tops(dist: metadata.Distribution) -> list[str]:
    """The top-level modules and directories a distribution installs."""
    files = dist.files
    if files is None:
        listed = dist.read_text("top_level.txt") or ""
        return [name for name in listed.split() if name]
    tops = set()
    for file in files:
        top = file.parts[0] if file.parts else ""
        if not top or top in _SKIPPED_TOPS or top.endswith((".dist-info", ".pth")):
            continue
        tops.add(top)
    return sorted(tops)


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _libpython() -> Path | None:
    """The shared libpython of this interpreter, when it has one."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return None
    libdir = sysconfig.get_config_var("LIBDIR")
    name = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY")
    if not libdir or not name:
        return None
    path = Path(libdir) / name
    return path.resolve() if path.exists() else None


def _system_libraries() -> Iterator[Mount]:
    """The shared-library directories, as the host has them (see the module docstring)."""
    for path in (*LIBRARY_DIRS, *ROOT_LINKS):
        yield from host_path(path)
    if Path("/etc/ld.so.cache").is_file():
        yield Mount("ro", "/etc/ld.so.cache", "/etc/ld.so.cache")


def host_path(path: str) -> Iterator[Mount]:
    """`path` as the host has it: a link stays a link, a directory or file is bound read-only,
    nothing when it does not exist."""
    if os.path.islink(path):
        yield Mount("symlink", path, source=os.readlink(path))
    elif os.path.exists(path):
        yield Mount("ro", path, path)


def _deduplicated(mounts: Sequence[Mount]) -> Iterator[Mount]:
    """`mounts` without the binds of a path already visible, the same, through an earlier bind
    (a Debian interpreter's libpython in `/usr/lib`)."""
    bound: list[str] = []
    for mount in mounts:
        if mount.kind == "ro" and mount.source == mount.target:
            if any(_within(mount.target, outer) for outer in bound):
                continue
            bound.append(mount.target)
        yield mount


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")
