"""The real `openbell` command for a person at a terminal: fitting tables, `--db`, `positions`,
every config error at once, rounded figures, and a baseline cycle's orders in `trace`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from report_builders import build_ledger

from openbell.ops.config import default_config_text
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade

TIMEOUT_S = 180  # generous: the machine running the suite may be busy


def openbell_command() -> list[str]:
    script = shutil.which("openbell", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "openbell.ops.cli"]


def openbell(cwd: Path, *args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"OPENBELL_CONFIG", "COLUMNS"}}
    env["OPENBELL_OFFLINE"] = "1"
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [*openbell_command(), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


@pytest.fixture(scope="module")
def ledger_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prepared SQLite ledger (see report_builders), with no config file beside it."""
    path = tmp_path_factory.mktemp("ledger") / "ledger.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    engine = make_engine(url)
    build_ledger(Ledger(engine))
    engine.dispose()
    return path


BAD_CONFIG = """\
[store]
urll = "sqlite:///var/x.db"

[markets.us]
universe = "nasdaq100"
cadence = "weekly"
source = "yfinance"
initial_cash = "10000"

[[agents]]
name = "cash"
kind = "cash"
markets = ["us", "crypto"]
seed = 3
"""


def test_a_bad_config_lists_every_problem_one_line_each(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD_CONFIG, encoding="utf-8")
    expected = [
        f"openbell: error: {bad}: store.urll: unknown key (did you mean 'url'?)",
        f"openbell: error: {bad}: agents[0].seed: unknown key",
        f"openbell: error: {bad}: markets.us.cadence: ",
    ]
    for args in (("config", "check"), ("leaderboard",), ("ledger", "verify")):
        result = openbell(tmp_path, "--config", str(bad), *args)
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 3, result.stderr
        for line, start in zip(lines, expected, strict=True):
            assert line.startswith(start), result.stderr

    good = tmp_path / "good.toml"
    good.write_text(default_config_text(), encoding="utf-8")
    result = openbell(tmp_path, "config", "check", "--config", str(good))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{good}: ok (markets us, cn, crypto; 5 agents)\n"
