"""`openbell run` verifies the ledger at start-up from its stored checkpoints, telling systemd
meanwhile that it needs more time (`EXTEND_TIMEOUT_USEC`) before `READY=1`.

A small ledger is replayed (the bundled crypto daily bars, two agents); the real daemon is started
on it three times, each with a `NOTIFY_SOCKET` the test listens on: the first start verifies every
row (no checkpoint yet) and stores a checkpoint per account; the second verifies only what was
written since (`since` in its `ledger_verified` line); a breach planted after the checkpoints is
found at the third start, which pauses that account. And the reading commands, which open the
ledger read-only, read it while a daemon writes it.
"""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path

from sqlalchemy import text

from openbell.store.db import make_engine
from openbell_testkit.cli import CRYPTO_1H, Daemon, clean_env, free_port, openbell

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
FAKE_CLOCK = "2025-11-17T00:00:00Z:60"


def _start(workdir: Path, config: Path) -> tuple[list[str], dict[str, object]]:
    """Run the daemon until READY=1; the notifications it sent, and its `ledger_verified` line."""
    path = workdir / "notify.sock"
    path.unlink(missing_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(60)
        env = clean_env(NOTIFY_SOCKET=str(path))
        messages: list[str] = []
        with Daemon(
            workdir, "--config", str(config), "--fake-clock", FAKE_CLOCK, env=env
        ) as daemon:
            while not any("READY=1" in message.splitlines() for message in messages):
                messages.append(sock.recv(4096).decode())
            daemon.wait_for("daemon_started")
            code, _elapsed_s, _stderr = daemon.stop(signal.SIGTERM)
            assert code == 0
            lines = [json.loads(line) for line in daemon.lines if line.startswith("{")]
    [verified] = [line for line in lines if line.get("event") == "ledger_verified"]
    return messages, verified


def test_start_up_verifies_from_its_checkpoints_and_extends_its_start_timeout(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    config = tmp_path / "openbell.toml"
    config.write_text(CONFIG.format(db=db.as_posix()), encoding="utf-8")
    replayed = openbell(tmp_path, "replay", "--config", str(config), "--start", START, "--end", END)
    assert replayed.returncode == 0, replayed.stderr
    messages, first = _start(tmp_path, config)
    extended = [m for m in messages if m.startswith("EXTEND_TIMEOUT_USEC=")]
    assert extended, messages
    assert int(extended[0].split("=")[1]) >= 10_000_000
    assert messages.index(extended[0]) < len(messages) - 1  # before READY
    assert (first["since"], first["checkpoints"], first["paused"]) == (None, 2, 0)
    _messages, second = _start(tmp_path, config)
    assert second["since"] is not None
    assert second["fell_back"] is None
    assert (second["checkpoints"], second["paused"]) == (2, 0)
    engine = make_engine(f"sqlite:///{db}")
    try:
        with engine.begin() as connection:
            account_id = connection.execute(text("SELECT max(account_id) FROM fill")).scalar_one()
            connection.execute(
                text("UPDATE account SET cash = cash || '7' WHERE id = :id"), {"id": account_id}
            )
    finally:
        engine.dispose()
    _messages, third = _start(tmp_path, config)
    assert third["paused"] == 1
    assert third["fell_back"] is not None
    assert third["checkpoints"] == 1
    verified = openbell(tmp_path, "ledger", "verify", "--db", str(db))
    assert verified.returncode == 1
    assert "cash_balance" in verified.stdout


HOURLY = """
[store]
url = "sqlite:///{db}"

[http]
listen = "127.0.0.1:{port}"

[markets.crypto]
universe = "crypto10"
cadence = "hourly"
source = "replay:{bars}"
initial_cash = "10000"

[[agents]]
name = "equal-weight"
kind = "equal_weight"
markets = ["crypto"]

[[agents]]
name = "random"
kind = "random"
markets = ["crypto"]
seed = 3
"""


def test_reading_commands_read_a_ledger_while_the_daemon_writes_it(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    config = tmp_path / "openbell.toml"
    config.write_text(
        HOURLY.format(db=db.as_posix(), port=free_port(), bars=CRYPTO_1H), encoding="utf-8"
    )
    with Daemon(tmp_path, "--config", str(config), "--fake-clock", "2025-11-03T00:59:00Z:600") as d:
        d.wait_for("slot_finished")
        for _ in range(3):
            for args in (("leaderboard",), ("ledger", "verify"), ("positions",)):
                result = openbell(tmp_path, *args, "--db", str(db))
                assert result.returncode == 0, (args, result.stderr)
            d.wait_for("slot_finished")
        code, _elapsed_s, stderr = d.stop(signal.SIGTERM)
    assert code == 0, stderr
    assert openbell(tmp_path, "ledger", "verify", "--full", "--db", str(db)).returncode == 0
