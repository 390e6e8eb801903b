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


def test_db_reads_a_ledger_without_a_config_file(ledger_db: Path, tmp_path: Path) -> None:
    for db in (str(ledger_db), f"sqlite:///{ledger_db}"):
        runs = {
            "leaderboard": openbell(tmp_path, "leaderboard", "--db", db, "-f", "json"),
            "report": openbell(tmp_path, "report", "alpha", "-m", "us", "--db", db, "--json"),
            "export": openbell(tmp_path, "export", "fills", "--db", db),
            "trace": openbell(tmp_path, "trace", "1", "--db", db),
            "ledger verify": openbell(tmp_path, "ledger", "verify", "--db", db),
        }
        for name, result in runs.items():
            assert result.returncode == 0, (name, db, result.stderr)
        assert '"final_nav": "10080.00"' in runs["leaderboard"].stdout
        assert '"agent": "alpha"' in runs["report"].stdout
        assert runs["export"].stdout.count("AAPL") == 3
        assert "cycle 1: alpha (buy_and_hold) in us" in runs["trace"].stdout
        assert runs["ledger verify"].stdout.startswith("ledger ok: 4 accounts, 4 fills")
    assert not (tmp_path / "openbell.toml").exists()


def test_db_overrides_the_config_store(ledger_db: Path, tmp_path: Path) -> None:
    (tmp_path / "openbell.toml").write_text(
        default_config_text().replace("sqlite:///var/openbell.db", "sqlite:///elsewhere.db"),
        encoding="utf-8",
    )
    result = openbell(tmp_path, "leaderboard", "--db", str(ledger_db), "-f", "csv")
    assert result.returncode == 0, result.stderr
    assert "alpha" in result.stdout
    assert not (tmp_path / "elsewhere.db").exists()


def test_db_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    result = openbell(tmp_path, "leaderboard", "--db", "var/nowhere.db")
    assert result.returncode == 2
    assert result.stderr == "openbell: error: --db var/nowhere.db: no such file\n"
    assert not (tmp_path / "var").exists()
