"""`-h` is `--help` on every command and group, and `--version` prints the installed version."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pytest
import typer

from openbell.ops import cli


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
