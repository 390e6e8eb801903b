"""A damaged, corrupt or empty SQLite ledger through the real `openbell` console script.

One small ledger is replayed once (the bundled crypto daily bars, a cash and a random agent) and
given a `daemon_run` and an `agent_token` row; each test damages a copy of it page by page
(`openbell_testkit.damage`) and runs the commands on it:
- random bytes over the pages of `daemon_run` and `agent_token` (the tables and their indexes):
  `ledger verify` fails naming the damage, `leaderboard`, `serve` and `replay --resume` refuse
  the file with one `database:` line naming it, exit 2;
- the pages of `cycle`'s `UNIQUE(account_id, slot_at)` index scrambled: `ledger verify` fails;
- a byte that is not UTF-8 in `sqlite_master` (SQLite's message about the schema cannot be
  decoded): one `database:` line naming the path, exit 2, from verify, leaderboard, serve, run
  and replay;
- an empty file (0 bytes): the reading commands report it and leave it as it was (no -wal or -shm
  beside it), `run` and `replay` refuse it unless `--create`.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from openbell.store.daemon_runs import DaemonRuns
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell_testkit.cli import assert_one_error_line, openbell
from openbell_testkit.damage import break_schema_text, indexes_of, pages_of, scramble_pages

START, END = "2025-11-03", "2025-11-14"
CONFIG = """
[store]
url = "sqlite:///{db}"

[markets.crypto]
universe = "crypto10"
cadence = "daily"
source = "bundled"
initial_cash = "10000"

[[agents]]
name = "cash"
kind = "cash"
markets = ["crypto"]

[[agents]]
name = "random"
kind = "random"
markets = ["crypto"]
seed = 3
"""
#: A fast clock at a Monday midnight after the ledger's last slot, for `openbell run`.
FAKE_CLOCK = "2025-11-17T00:00:00Z:60"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The replayed ledger with a daemon run and an agent token recorded, folded into one file."""
    workdir = tmp_path_factory.mktemp("pristine")
    db = workdir / "ledger.db"
    config = workdir / "openbell.toml"
    config.write_text(CONFIG.format(db=db.as_posix()), encoding="utf-8")
    replayed = openbell(workdir, "replay", "--config", str(config), "--start", START, "--end", END)
    assert replayed.returncode == 0, replayed.stderr
    engine = make_engine(f"sqlite:///{db}")
    try:
        now = datetime(2025, 11, 15, tzinfo=UTC)
        DaemonRuns(engine).record_start("host:1:run", ["crypto"], now)
        Ledger(engine).issue_agent_token("cash", now)
    finally:
        engine.dispose()
    scramble_pages(db, [])  # folds the WAL into the file
    assert openbell(workdir, "ledger", "verify", "--config", str(config)).returncode == 0
    return db


@pytest.fixture
def copy(pristine: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the ledger in its own folder, with its config: (file, config)."""
    db = tmp_path / "ledger.db"
    shutil.copyfile(pristine, db)
    config = tmp_path / "openbell.toml"
    config.write_text(CONFIG.format(db=db.as_posix()), encoding="utf-8")
    return db, config


def _database_line(result: subprocess.CompletedProcess[str], path: Path, *words: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    return assert_one_error_line(result, "database:", str(path), *words)


def _serve(workdir: Path, db: Path) -> subprocess.CompletedProcess[str]:
    return openbell(workdir, "serve", "--db", str(db), "--listen", "127.0.0.1:0", timeout_s=30)


def test_random_pages_over_daemon_run_and_agent_token_are_caught(
    copy: tuple[Path, Path],
) -> None:
    db, config = copy
    tables = ("daemon_run", "agent_token")
    pages = pages_of(db, *tables, *[name for table in tables for name in indexes_of(db, table)])
    assert len(pages) >= 4
    scramble_pages(db, pages[:4])
    workdir = db.parent
    verified = openbell(workdir, "ledger", "verify", "--db", str(db))
    assert "ledger ok" not in verified.stdout
    _database_line(verified, db, "damaged", "daemon_run")
    _database_line(openbell(workdir, "leaderboard", "--db", str(db)), db, "damaged")
    _database_line(_serve(workdir, db), db, "damaged")
    resumed = openbell(
        workdir, "replay", "--config", str(config), "--start", START, "--end", END, "--resume"
    )
    _database_line(resumed, db, "damaged")


def test_a_scrambled_unique_index_of_cycle_fails_verify(copy: tuple[Path, Path]) -> None:
    db, _config = copy
    [index] = [name for name in indexes_of(db, "cycle") if name.startswith("sqlite_autoindex")]
    scramble_pages(db, pages_of(db, index))
    verified = openbell(db.parent, "ledger", "verify", "--db", str(db))
    assert "ledger ok" not in verified.stdout
    _database_line(verified, db, "damaged", "cycle")


def test_a_schema_that_is_not_utf8_is_one_database_line_from_every_command(
    copy: tuple[Path, Path],
) -> None:
    db, config = copy
    break_schema_text(db, "cycle")
    workdir = db.parent
    results = {
        "verify": openbell(workdir, "ledger", "verify", "--db", str(db)),
        "leaderboard": openbell(workdir, "leaderboard", "--db", str(db)),
        "serve": _serve(workdir, db),
        "run": openbell(
            workdir, "run", "--config", str(config), "--fake-clock", FAKE_CLOCK, timeout_s=60
        ),
        "replay": openbell(
            workdir, "replay", "--config", str(config), "--start", START, "--end", END, "--resume"
        ),
    }
    for command, result in results.items():
        assert "UnicodeDecodeError" not in result.stderr, command
        # `run` logs JSON lines on stdout; its error line is still the one line on stderr.
        _database_line(result, db)


def test_an_empty_file_is_reported_and_left_empty_and_not_adopted(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    db.touch()
    config = tmp_path / "openbell.toml"
    config.write_text(CONFIG.format(db=db.as_posix()), encoding="utf-8")
    for args in (
        ("ledger", "verify", "--db", str(db)),
        ("leaderboard", "--db", str(db)),
        ("positions", "--db", str(db)),
        ("export", "fills", "--db", str(db)),
    ):
        _database_line(openbell(tmp_path, *args), db, "empty")
    _database_line(_serve(tmp_path, db), db, "empty")
    refused = {
        "run": openbell(tmp_path, "run", "--config", str(config), "--fake-clock", FAKE_CLOCK),
        "replay": openbell(
            tmp_path, "replay", "--config", str(config), "--start", START, "--end", END
        ),
        "replay --resume": openbell(
            tmp_path, "replay", "--config", str(config), "--start", START, "--end", END, "--resume"
        ),
    }
    for command, result in refused.items():
        line = _database_line(result, db, "empty")
        assert "--create" in line, command
    assert db.stat().st_size == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["empty.db", "openbell.toml"]
    created = openbell(
        tmp_path,
        "replay",
        "--config",
        str(config),
        "--start",
        START,
        "--end",
        END,
        "--create",
    )
    assert created.returncode == 0, created.stderr
    assert openbell(tmp_path, "ledger", "verify", "--db", str(db)).returncode == 0


def test_a_ledger_of_an_older_revision_is_upgraded_and_someone_elses_database_refused(
    tmp_path: Path,
) -> None:
    """`run` and `replay` check a file's pages before they write, not its schema: a ledger at an
    older revision lacks the newer tables, and their migrations bring it to the head. A SQLite
    file with tables but no openbell schema is someone else's database: refused, left as it was."""
    from openbell.store.migrate import upgrade

    old = tmp_path / "old.db"
    upgrade(f"sqlite:///{old}", "0017")  # before verify_checkpoint (0018)
    config = tmp_path / "openbell.toml"
    config.write_text(CONFIG.format(db=old.as_posix()), encoding="utf-8")
    replayed = openbell(tmp_path, "replay", "--config", str(config), "--start", START, "--end", END)
    assert replayed.returncode == 0, replayed.stderr
    assert openbell(tmp_path, "ledger", "verify", "--db", str(old)).returncode == 0

    other = tmp_path / "notes.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE note (body TEXT)")
    before = other.read_bytes()
    config.write_text(CONFIG.format(db=other.as_posix()), encoding="utf-8")
    refused = openbell(tmp_path, "replay", "--config", str(config), "--start", START, "--end", END)
    _database_line(refused, other, "no openbell schema")
    assert other.read_bytes() == before
