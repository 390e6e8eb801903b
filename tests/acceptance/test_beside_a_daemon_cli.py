"""Experiments beside a running daemon (issue 28 item 5): a replay of a config whose SQLite ledger
a daemon holds says to use --db, and runs with it; a replay whose /mcp port is taken names
--listen, and runs with it; `db upgrade` and `cycle` take --db."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

from openbell.daemon.locks import DaemonLock
from openbell_testkit.cli import CRYPTO_1H, assert_one_error_line, cycle, openbell

MARKET = (
    '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "ccxt:binance"\n'
    'initial_cash = "10000"\n\n'
)
HOLD = '[[agents]]\nname = "hold"\nkind = "buy_and_hold"\nmarkets = ["crypto"]\n\n'


def write_config(tmp_path: Path, body: str, listen: str = "127.0.0.1:8787") -> Path:
    path = tmp_path / "openbell.toml"
    path.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "var" / "openbell.db"}"\n\n'
        f'[http]\nlisten = "{listen}"\n\n' + MARKET + body,
        encoding="utf-8",
    )
    return path


def test_a_replay_of_a_ledger_a_daemon_holds_says_to_use_db_and_runs_with_it(
    tmp_path: Path,
) -> None:
    write_config(tmp_path, HOLD)
    daemon = DaemonLock(f"sqlite:///{tmp_path / 'var' / 'openbell.db'}", role="daemon")
    daemon.acquire()  # the live daemon's lock, as `openbell run` holds it
    try:
        held = openbell(tmp_path, "replay", "--start", "2025-11-03", "--end", "2025-11-04")
        assert held.returncode == 2
        assert_one_error_line(held, "another openbell daemon", "--db FILE")
        experiment = tmp_path / "experiment" / "ledger.db"
        experiment.parent.mkdir()
        beside = openbell(
            tmp_path, "replay", "--start", "2025-11-03", "--end", "2025-11-04",
            "--db", str(experiment),
        )  # fmt: skip
    finally:
        daemon.release()
    assert beside.returncode == 0, beside.stdout + beside.stderr
    assert "2 cycles done" in beside.stdout
    with sqlite3.connect(experiment) as connection:
        assert connection.execute("SELECT count(*) FROM cycle").fetchone() == (2,)


def test_a_replay_whose_mcp_port_is_taken_names_listen(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        write_config(
            tmp_path,
            '[[agents]]\nname = "outside"\nkind = "mcp"\nmarkets = ["crypto"]\nmax_wall_s = 1\n',
            listen=f"127.0.0.1:{port}",
        )
        taken = openbell(tmp_path, "replay", "--start", "2025-11-03", "--end", "2025-11-03")
        assert taken.returncode == 2
        assert_one_error_line(taken, f"127.0.0.1:{port}", "cannot listen there", "--listen")
        moved = openbell(
            tmp_path, "replay", "--start", "2025-11-03", "--end", "2025-11-03",
            "--listen", "127.0.0.1:0", "--db", str(tmp_path / "moved.db"),
        )  # fmt: skip
    assert "cannot listen" not in moved.stderr
    assert "replayed 1 slots" in moved.stdout, moved.stdout + moved.stderr


def test_db_upgrade_and_cycle_take_db(tmp_path: Path) -> None:
    (tmp_path / "openbell.toml").write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "var" / "openbell.db"}"\n\n'
        '[markets.crypto]\nuniverse = "crypto10"\ncadence = "hourly"\n'
        f'source = "replay:{CRYPTO_1H.as_posix()}"\ninitial_cash = "10000"\n\n'
        '[[agents]]\nname = "random"\nkind = "random"\nmarkets = ["crypto"]\nseed = 3\n',
        encoding="utf-8",
    )
    other = tmp_path / "other.db"
    upgraded = openbell(tmp_path, "db", "upgrade", "--db", str(other))
    assert upgraded.returncode == 0, upgraded.stderr
    assert "database at revision" in upgraded.stdout
    assert other.is_file()
    assert not (tmp_path / "var" / "openbell.db").exists()
    ran = cycle(tmp_path, "2025-11-03T05:00Z", "--fake-clock", "2025-11-03T05:30:00Z", "--db",
                str(other))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    with sqlite3.connect(other) as connection:
        assert connection.execute("SELECT status FROM cycle").fetchall() == [("done",)]
    assert not (tmp_path / "var" / "openbell.db").exists()
