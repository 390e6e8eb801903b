"""A command agent's command made independent of the working directory at load time: `{python}`
is the daemon's interpreter, relative paths that exist beside the config file become absolute
there, and options, placeholders and bare program names are left alone."""

from __future__ import annotations

import sys
from pathlib import Path

from openbell.ops.config.schema import CommandAgentConfig, load_config, resolved_command

PYTHON = "/opt/venv/bin/python"


def test_python_placeholder_and_paths_beside_the_config(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("", encoding="utf-8")
    (tmp_path / "data").mkdir()
    command = ("{python}", "agent.py", "--data", "data", "-v", "missing.txt", "{prompt}")
    assert resolved_command(command, tmp_path, PYTHON) == (
        PYTHON, str(tmp_path / "agent.py"), "--data", str(tmp_path / "data"), "-v",
        "missing.txt", "{prompt}",
    )  # fmt: skip


def test_a_relative_program_path_is_resolved_and_a_bare_name_is_left_to_path(
    tmp_path: Path,
) -> None:
    assert resolved_command(("./run.sh",), tmp_path, PYTHON) == (str(tmp_path / "run.sh"),)
    assert resolved_command(("python", "/abs/x.py"), tmp_path, PYTHON) == ("python", "/abs/x.py")
    assert resolved_command(("{python}", "-m", "pkg"), tmp_path, PYTHON) == (PYTHON, "-m", "pkg")


def test_load_config_resolves_against_the_files_directory_not_the_working_one(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "client.py").write_text("", encoding="utf-8")
    path = folder / "openbell.toml"
    path.write_text(
        '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "ccxt:binance"\n'
        'initial_cash = "10000"\n\n'
        '[[agents]]\nname = "c"\nkind = "command"\nmarkets = ["crypto"]\n'
        'command = ["{python}", "client.py"]\nprompt = "stdin"\n',
        encoding="utf-8",
    )
    (agent,) = load_config(path).agents
    assert isinstance(agent, CommandAgentConfig)
    assert agent.command == (sys.executable, str(folder / "client.py"))
