"""What each jail shows, read from its bind list (no jail is started here): the strategy jail
binds the interpreter, its standard library and numpy, pandas and their requirements only; a
command's jail binds the system, a curated `/etc`, the program's installation, its absolute
arguments and `read_paths`, and refuses a bind that would show a protected path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from openbell.agents.jail.bwrap import Features, Jail, Mount, command_line
from openbell.agents.jail.command_jail import ETC, command_jail
from openbell.agents.jail.python_jail import SITE, package_files, python_jail
from openbell.agents.strategy_code.sandbox import CHILD, PACKAGES
from openbell.markets.errors import ConfigError

ENV = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}


def _sources(jail: Jail) -> set[str]:
    return {m.source for m in jail.mounts if m.kind in ("ro", "rw")}


def test_the_strategy_jail_binds_only_the_interpreter_and_the_allowed_packages() -> None:
    jailed = python_jail(CHILD, packages=PACKAGES)
    names = set(package_files(PACKAGES))
    assert {"numpy", "pandas", "dateutil"} <= names
    assert names.isdisjoint({"openbell", "sqlalchemy", "httpx", "pydantic", "structlog"})
    targets = {m.target for m in jailed.jail.mounts}
    assert {f"{SITE}/{name}" for name in names} <= targets
    sources = _sources(jailed.jail)
    project = Path(__file__).resolve().parents[2]
    site_packages = Path(next(iter(package_files(["numpy"]).values()))).parent
    assert str(project) not in sources
    assert str(site_packages) not in sources  # the packages one by one, never the whole venv
    assert not [s for s in sources if s.startswith("/etc/") and s != "/etc/ld.so.cache"]
    assert not [s for s in sources if s.startswith("/home")]
    (script,) = [m for m in jailed.jail.mounts if m.target == jailed.script]
    assert script.source == str(CHILD.resolve())
    assert not jailed.jail.network
    assert not jailed.jail.proc


def test_a_jails_command_line_unshares_everything_but_the_network_it_keeps() -> None:
    found = Features(path="/usr/bin/bwrap", size=True, disable_userns=True)
    closed = command_line(Jail(mounts=(Mount("ro", "/usr", "/usr"),)), ["/usr/bin/true"], found)
    for option in ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"):
        assert option in closed
    for option in ("--unshare-net", "--die-with-parent", "--new-session", "--clearenv"):
        assert option in closed
    assert closed[closed.index("--uid") + 1] == "65534"
    assert closed[closed.index("--cap-drop") + 1] == "ALL"
    assert "--disable-userns" in closed
    assert "--proc" not in closed
    opened = command_line(
        Jail(mounts=(), network=True, proc=True, disable_userns=False), ["/x"], found
    )
    assert "--unshare-net" not in opened
    assert opened[opened.index("--proc") + 1] == "/proc"
    assert "--disable-userns" not in opened


def test_a_commands_jail_binds_its_program_arguments_and_read_paths(tmp_path: Path) -> None:
    script = tmp_path / "agent" / "run.py"
    script.parent.mkdir()
    script.write_text("print('hi')\n", encoding="utf-8")
    (tmp_path / "agent" / "secret.txt").write_text("not for the command", encoding="utf-8")
    extra = tmp_path / "extra"
    extra.mkdir()
    workdir = tmp_path / "work"
    workdir.mkdir()
    jail, program = command_jail(
        argv=(Path(sys.executable).name, str(script), "{prompt}"),
        workdir=workdir,
        env=ENV,
        read_paths=[str(extra)],
    )
    assert program == str(Path(sys.executable).absolute())
    sources = _sources(jail)
    assert str(script) in sources  # the file, not its directory
    assert str(script.parent) not in sources
    assert str(extra) in sources
    assert any(Path(sys.prefix).absolute() == Path(s) for s in sources)
    (writable,) = [m for m in jail.mounts if m.kind == "rw"]
    assert writable.source == str(workdir)
    assert jail.env["HOME"] == str(workdir)
    assert jail.cwd == str(workdir)
    assert jail.network
    etc = [m.target for m in jail.mounts if m.target.startswith("/etc/")]
    assert etc
    for target in etc:
        name = target.removeprefix("/etc/")
        assert name in ETC or name.startswith("python3"), target
    assert not [t for t in etc if "openbell" in t]


def test_a_bind_that_would_show_a_protected_path_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    ledger = state / "openbell.db"
    ledger.write_bytes(b"")
    program = state / "agent"
    program.write_text("#!/bin/sh\n", encoding="utf-8")
    program.chmod(0o755)
    with pytest.raises(ConfigError, match="would be visible to the command"):
        command_jail(argv=(str(program),), workdir=tmp_path, env=ENV, protected=[ledger])
    with pytest.raises(ConfigError, match="would be visible to the command"):
        command_jail(
            argv=("true",), workdir=tmp_path, env=ENV, read_paths=[str(state)], protected=[ledger]
        )
    with pytest.raises(ConfigError, match="not an absolute path that exists"):
        command_jail(argv=("true",), workdir=tmp_path, env=ENV, read_paths=["relative/path"])
    with pytest.raises(ConfigError, match="no such program"):
        command_jail(argv=("no-such-program-here",), workdir=tmp_path, env=ENV)
