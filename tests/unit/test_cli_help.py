"""`-h` is `--help` on every command and group, `--version` prints the installed version, and
neither imports more than typer and the standard library."""

from __future__ import annotations

import gc
import importlib
import inspect
import subprocess
import sys
from importlib.metadata import version
from typing import Any

import pytest
import typer

from openbell.daemon.plan import LEASE_S
from openbell.ops import cli
from openbell.ops.cli import daemon


def command_paths() -> list[tuple[str, ...]]:
    """The path of every group and command of the `openbell` app, the root included."""
    paths: list[tuple[str, ...]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        paths.append(path)
        for name, sub in getattr(command, "commands", {}).items():  # a group (typer's own click)
            walk(sub, (*path, name))

    walk(typer.main.get_command(cli.app), ())
    return paths


def test_the_app_has_the_commands_the_readme_lists() -> None:
    paths = {" ".join(path) for path in command_paths()}
    for name in ("leaderboard", "report", "export", "trace", "positions", "ledger verify", "demo"):
        assert name in paths


@pytest.mark.parametrize("path", command_paths(), ids=lambda path: " ".join(path) or "openbell")
def test_h_is_help_everywhere(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main([*path, "-h"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert out.startswith(f"Usage: {' '.join(('openbell', *path))} ")
    assert "-h, --help" in out
    assert cli.main([*path, "--help"]) == 0
    assert capsys.readouterr().out == out


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == (f"openbell {version('openbell')}\n", "")
    assert cli.main(["-V"]) == 0
    assert capsys.readouterr().out == out


#: What the command line must not import before a command runs: `--help` (and building the app)
#: pays only for typer and the standard library.
HEAVY = (
    "alembic",
    "akshare",
    "apscheduler",
    "ccxt",
    "exchange_calendars",
    "httpx",
    "matplotlib",
    "numpy",
    "pandas",
    "pyarrow",
    "pydantic",
    "rich",
    "sqlalchemy",
    "sqlmodel",
    "structlog",
    "yfinance",
)


@pytest.mark.parametrize(
    ("argv", "typers_own"),
    [
        (["--help"], set()),
        (["--version"], set()),
        # typer validates a command's options through pydantic, which it imports to do so.
        (["leaderboard", "--help"], {"pydantic"}),
        (["run", "--help"], {"pydantic"}),
    ],
)
def test_help_imports_nothing_heavy(argv: list[str], typers_own: set[str]) -> None:
    watched = set(HEAVY) - typers_own
    program = (
        "import sys\n"
        "from openbell.ops.entry import main\n"
        f"sys.argv = ['openbell', *{argv!r}]\n"
        "code = main()\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & {watched!r})\n"
        "print('heavy:', heavy, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "heavy: []"


def test_run_lease_default_is_the_daemon_s() -> None:
    lease = inspect.signature(daemon.run).parameters["lease_s"].default
    assert lease == LEASE_S


@pytest.mark.parametrize(
    ("command", "collects"),
    [("leaderboard", False), ("trace", False), ("run", True), ("replay", False), ("demo", True)],
)
def test_only_a_quick_command_keeps_the_garbage_collector_off(command: str, collects: bool) -> None:
    """... or one that turns it on itself after its imports (the replay: see
    `tests/acceptance/test_start_imports.py`)."""
    cli_app = importlib.import_module("openbell.ops.cli.app")
    was_enabled = gc.isenabled()
    gc.disable()  # as ops/entry.py starts every command
    try:
        cli_app._collect_garbage(command)
        assert gc.isenabled() is collects
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


@pytest.mark.parametrize("argv", [["--version"], ["no-such-command"]])
def test_the_entry_leaves_nothing_for_the_exit_to_collect(argv: list[str]) -> None:
    """The interpreter's finalization would run the collector over every object the imports
    built (`ops/entry.py`): the entry moves them all out of its way first, on success or not."""
    program = (
        "import gc, sys\n"
        "from openbell.ops.entry import main\n"
        f"sys.argv = ['openbell', *{argv!r}]\n"
        "code = main()\n"
        "frozen = gc.get_freeze_count() > 10_000\n"
        "print('tracked:', len(gc.get_objects()), frozen, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "tracked: 0 True"
