"""The real `openbell` console script in a subprocess: exit codes, one-line errors, daemon stop."""

from __future__ import annotations

import json
import signal
import socket
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import bindparam, text

from openbell.ops.config.schema import default_config_text
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.types import ExactDecimal
from openbell_testkit.cli import (
    STOP_WITHIN_S,
    Daemon,
    assert_one_error_line,
    clean_env,
    config_text,
    openbell,
)

ONE_SHOT_COMMANDS = [["db", "upgrade"], ["ledger", "verify"]]
MALFORMED = {
    "unknown key": ("[store]\n", '[store]\nurll = "x"\n', "store.urll"),
    "wrong type": ('level = "info"', "level = 3", "log.level"),
    "bad value": ('cadence = "hourly"', 'cadence = "weekly"', "markets.us.cadence"),
    "float cash": ('initial_cash = "10000"', "initial_cash = 10000.5", "markets.us.initial_cash"),
    "bad TOML": ("[markets.cn]", "[markets.cn", "invalid TOML"),
}


@pytest.mark.parametrize(
    ("case", "command"),
    [*((case, ["run"]) for case in MALFORMED), *(("unknown key", c) for c in ONE_SHOT_COMMANDS)],
)
def test_malformed_config_is_one_line_and_exit_2(
    tmp_path: Path, case: str, command: list[str]
) -> None:
    old, new, key = MALFORMED[case]
    (tmp_path / "openbell.toml").write_text(config_text(**{old: new}), encoding="utf-8")
    result = openbell(tmp_path, *command)
    assert result.returncode == 2
    assert_one_error_line(result, "openbell.toml", key)
    assert result.stdout == ""


@pytest.mark.parametrize("command", [["run"], *ONE_SHOT_COMMANDS])
def test_missing_config_file_is_one_line_and_exit_2(tmp_path: Path, command: list[str]) -> None:
    result = openbell(tmp_path, *command, "--config", "absent.toml")
    assert result.returncode == 2
    assert_one_error_line(result, "absent.toml", "no such file", "openbell init")


@pytest.mark.parametrize(
    "args", [["--bogus"], ["frobnicate"], ["run", "--heartbeat-s", "fast"], ["--log-format", "xml"]]
)
def test_bad_command_line_is_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    result = openbell(tmp_path, *args)
    assert result.returncode == 2
    assert_one_error_line(result, "--help")


@pytest.mark.parametrize(
    "command", [[], ["init"], ["run"], ["db"], ["db", "upgrade"], ["ledger"], ["ledger", "verify"]]
)
def test_every_command_has_help(tmp_path: Path, command: list[str]) -> None:
    result = openbell(tmp_path, *command, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: openbell")
    assert result.stderr == ""


def test_init_upgrade_verify_on_fresh_sqlite(tmp_path: Path) -> None:
    init = openbell(tmp_path, "init")
    assert (init.returncode, init.stdout) == (0, "wrote openbell.toml\n")
    assert (tmp_path / "openbell.toml").read_text(encoding="utf-8") == default_config_text()

    upgrade = openbell(tmp_path, "db", "upgrade")
    assert upgrade.returncode == 0, upgrade.stderr
    assert upgrade.stdout.startswith("database at revision ")
    assert (tmp_path / "var" / "openbell.db").is_file()

    verify = openbell(tmp_path, "ledger", "verify")
    assert verify.returncode == 0, verify.stderr
    assert verify.stdout.startswith("ledger ok")


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "mine.toml"
    assert openbell(tmp_path, "init", "--config", str(path)).returncode == 0
    path.write_text("# edited\n", encoding="utf-8")

    again = openbell(tmp_path, "init", "--config", str(path))
    assert again.returncode == 1
    assert_one_error_line(again, "already exists", "--force")
    assert path.read_text(encoding="utf-8") == "# edited\n"

    forced = openbell(tmp_path, "init", "--config", str(path), "--force")
    assert forced.returncode == 0
    assert path.read_text(encoding="utf-8") == default_config_text()


def test_ledger_breach_is_reported_per_account_with_exit_1(tmp_path: Path) -> None:
    assert openbell(tmp_path, "init").returncode == 0
    assert openbell(tmp_path, "db", "upgrade").returncode == 0
    engine = make_engine(f"sqlite:///{tmp_path / 'var' / 'openbell.db'}")
    try:
        ledger = Ledger(engine)
        now = datetime(2025, 3, 3, 14, 30, tzinfo=UTC)
        agent_id = ledger.ensure_agent("cash", "cash", now)
        account_id = ledger.open_account(agent_id, "us", "USD", Decimal(10000), now)
        ledger.open_account(agent_id, "cn", "CNY", Decimal(100000), now)
        with engine.begin() as connection:
            connection.execute(
                text("UPDATE account SET cash = :cash WHERE id = :id").bindparams(
                    bindparam("cash", type_=ExactDecimal())
                ),
                {"cash": Decimal("10500.25"), "id": account_id},
            )
    finally:
        engine.dispose()

    verify = openbell(tmp_path, "ledger", "verify")

    assert verify.returncode == 1, verify.stderr
    assert "Traceback" not in verify.stdout + verify.stderr
    breaches = [line for line in verify.stdout.splitlines() if line.startswith("account ")]
    assert len(breaches) == 1
    assert breaches[0].startswith(f"account {account_id} (cash/us)")
    assert "10500.25" in breaches[0]


def test_global_config_option_and_environment_variable(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.toml").write_text(default_config_text(), encoding="utf-8")
    by_option = openbell(tmp_path, "--config", "elsewhere.toml", "db", "upgrade")
    assert by_option.returncode == 0, by_option.stderr
    by_env = openbell(tmp_path, "ledger", "verify", env=clean_env(OPENBELL_CONFIG="elsewhere.toml"))
    assert by_env.returncode == 0, by_env.stderr


def test_log_format_console_is_for_people(tmp_path: Path) -> None:
    (tmp_path / "openbell.toml").write_text(default_config_text(), encoding="utf-8")
    result = openbell(tmp_path, "--log-format", "console", "db", "upgrade")
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "db_upgraded" in line]
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def test_schema_not_at_head_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "openbell.toml").write_text(default_config_text(), encoding="utf-8")
    verify = openbell(tmp_path, "ledger", "verify")
    assert verify.returncode == 2
    assert_one_error_line(verify, "openbell db upgrade")

    run = openbell(tmp_path, "run", "--no-upgrade")
    assert run.returncode == 2
    assert_one_error_line(run, "openbell db upgrade")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_run_logs_json_and_stops_cleanly_on_signal(tmp_path: Path, signum: signal.Signals) -> None:
    # A free port: the default 8787 may be taken by another run on this machine.
    free_port = {'listen = "127.0.0.1:8787"': 'listen = "127.0.0.1:0"'}
    (tmp_path / "openbell.toml").write_text(config_text(**free_port), encoding="utf-8")
    # A Tuesday evening (UTC): no slot to catch up, whose data retries the stop would wait for.
    with Daemon(tmp_path, "--heartbeat-s", "0.2", "--fake-clock", "2026-12-01T21:30Z") as daemon:
        daemon.wait_for("daemon_started")
        daemon.wait_for("daemon_heartbeat")
        code, elapsed_s, stderr = daemon.stop(signum)

    assert code == 0, stderr
    assert elapsed_s < STOP_WITHIN_S
    assert stderr == ""
    records = daemon.records()
    assert all(isinstance(record.get("event"), str) and record["level"] for record in records)
    events = [record["event"] for record in records]
    assert events.index("db_upgraded") < events.index("daemon_started")
    # Between the two, the daemon drains its cycles and stops its scheduler.
    assert events[-1] == "daemon_stopped"
    assert events.index("daemon_stopping") < len(events) - 1
    assert records[-1]["reason"] == signum.name
    started = records[events.index("daemon_started")]
    assert started["markets"] == ["us", "cn", "crypto"]
    assert started["store_url"] == "sqlite:///var/openbell.db"
    assert "cash" in started["agents"]


def test_run_hides_the_store_password(tmp_path: Path) -> None:
    text = config_text(
        **{'url = "sqlite:///var/openbell.db"': 'url = "postgresql://u:s3cr3t@127.0.0.1:1/x"'}
    )
    (tmp_path / "openbell.toml").write_text(text, encoding="utf-8")
    result = openbell(tmp_path, "run")
    assert result.returncode == 2
    assert_one_error_line(result, "database")
    assert "s3cr3t" not in result.stdout + result.stderr


def test_run_on_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        listen = {'listen = "127.0.0.1:8787"': f'listen = "127.0.0.1:{port}"'}
        (tmp_path / "openbell.toml").write_text(config_text(**listen), encoding="utf-8")
        result = openbell(tmp_path, "run", "--fake-clock", "2026-12-01T21:30Z")
    assert result.returncode == 2, result.stderr
    assert_one_error_line(result, f"127.0.0.1:{port}", "cannot listen")
    assert "Traceback" not in result.stdout + result.stderr
