"""`openbell run` for real, in a subprocess on a fake clock (`--fake-clock`, for tests only):
SIGTERM in mid-cycle and kill -9 leave a ledger that verifies and recovers, and with the default
config and no network the daemon keeps running, skips cycles with `data_unavailable` and says so
on /healthz."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any

from openbell.ops.config.schema import default_config_text
from openbell_testkit.cli import CRYPTO_1H, cycle, cycle_rows, free_port
from openbell_testkit.cli import Daemon as CliDaemon
from openbell_testkit.cli import assert_ledger_verifies as assert_verifies
from openbell_testkit.cli import openbell as run_openbell

CRYPTO_HOURLY = f"""
[store]
url = "sqlite:///var/openbell.db"

[http]
listen = "127.0.0.1:{{port}}"

[markets.crypto]
universe = "crypto10"
cadence = "hourly"
source = "replay:{CRYPTO_1H}"
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


def openbell(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_openbell(cwd, *args, timeout_s=120)


def assert_ledger_verifies(tmp_path: Path) -> None:
    assert_verifies(tmp_path, timeout_s=120)


#: The CLI tests' daemon helper, allowed the stop grace a cycle in flight may need.
Daemon = partial(CliDaemon, stop_within_s=30)


def write_config(tmp_path: Path, text: str) -> int:
    port = free_port()
    (tmp_path / "openbell.toml").write_text(text.replace("{port}", str(port)), encoding="utf-8")
    return port


def test_sigterm_in_mid_cycle_leaves_a_ledger_that_verifies(tmp_path: Path) -> None:
    write_config(tmp_path, CRYPTO_HOURLY)
    args = ("--fake-clock", "2025-11-03T00:59:00Z:60", "--stop-grace-s", "0")
    with Daemon(tmp_path, *args) as daemon:
        daemon.wait_for("cycle_claimed")
        code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    events = [record["event"] for record in daemon.records(json_only=True)]
    assert events[-1] == "daemon_stopped"
    rows = cycle_rows(tmp_path)
    assert rows
    assert "claimed" not in {row.status for row in rows}
    assert_ledger_verifies(tmp_path)


def test_restart_after_kill_9_recovers(tmp_path: Path) -> None:
    write_config(tmp_path, CRYPTO_HOURLY)
    with Daemon(tmp_path, "--fake-clock", "2025-11-03T00:59:30Z:30") as daemon:
        daemon.wait_for("cycle_claimed")
        daemon.process.send_signal(signal.SIGKILL)
        daemon.process.wait(timeout=10)
    with Daemon(tmp_path, "--fake-clock", "2025-11-03T01:05:00Z:30") as daemon:
        daemon.wait_for("daemon_started")
        daemon.wait_for("slot_finished")
        code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    rows = cycle_rows(tmp_path)
    assert "claimed" not in {row.status for row in rows}
    slot_rows = [row for row in rows if row.slot_at.hour == 1]
    assert len(slot_rows) == 2
    assert {row.status for row in slot_rows} == {"done"}  # completed within the grace window
    assert_ledger_verifies(tmp_path)


def get(port: int, path: str) -> tuple[int, bytes]:
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_default_config_without_network_keeps_running_and_reports_skips(tmp_path: Path) -> None:
    text = default_config_text().replace('listen = "127.0.0.1:8787"', 'listen = "127.0.0.1:{port}"')
    port = write_config(tmp_path, text)
    # Just before crypto's 00:00 UTC bell on a Tuesday, ten minutes per second.
    with Daemon(tmp_path, "--fake-clock", "2026-12-01T23:59:00Z:600") as daemon:
        daemon.wait_for("daemon_started")
        daemon.wait_for("slot_finished", timeout_s=60)
        deadline = time.monotonic() + 45
        body: dict[str, Any] = {}
        status = 0
        while time.monotonic() < deadline:
            status, raw = get(port, "/healthz")
            body = json.loads(raw)
            # the slot's five skips are counted when its report is in (a `not_run` count of an
            # interrupted claim may come first on a loaded machine)
            if status == 503 and "data_unavailable" in body["markets"]["crypto"]["skipped"]:
                break
            time.sleep(0.5)
        metrics_status, metrics = get(port, "/metrics")
        assert daemon.process.poll() is None  # still running
        code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    assert status == 503, body
    assert "crypto" in body["overdue"]
    assert body["markets"]["crypto"]["skipped"]["data_unavailable"] == 5
    assert metrics_status == 200
    assert b'openbell_cycles_total{market="crypto",status="skipped"} 5.0' in metrics
    assert b"openbell_data_errors_total" in metrics
    skipped = [row for row in cycle_rows(tmp_path) if row.status == "skipped"]
    assert len(skipped) == 5
    assert {row.reason for row in skipped} == {"data_unavailable"}


def test_a_fresh_install_is_not_overdue_for_slots_before_it_and_says_the_next_bells(
    tmp_path: Path,
) -> None:
    text = default_config_text().replace('listen = "127.0.0.1:8787"', 'listen = "127.0.0.1:{port}"')
    port = write_config(tmp_path, text)
    # A Tuesday evening: crypto's 00:00 UTC bell rang 21 hours ago and the US 20:30 UTC one half
    # an hour ago, both before this ledger existed.
    with Daemon(tmp_path, "--fake-clock", "2026-12-01T21:00:00Z") as daemon:
        daemon.wait_for("daemon_started")
        status, raw = get(port, "/healthz")
        code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    body = json.loads(raw)
    assert (status, body["status"], body["overdue"]) == (200, "ok", {}), body
    next_bells = {
        "us": "2026-12-02T14:30:00+00:00",
        "cn": "2026-12-02T01:30:00+00:00",
        "crypto": "2026-12-02T00:00:00+00:00",
    }
    assert {market: body["markets"][market]["next_bell"] for market in next_bells} == next_bells
    logged = {
        record["market"]: record["next_bell_at"]
        for record in daemon.records(json_only=True)
        if record["event"] == "next_bell"
    }
    assert logged == next_bells


def test_cycle_command_runs_one_slot(tmp_path: Path) -> None:
    write_config(tmp_path, CRYPTO_HOURLY)
    result = cycle(tmp_path, "2025-11-03T05:00+00:00", timeout_s=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("crypto random 2025-11-03T05:00:00+00:00: done, ")
    again = cycle(tmp_path, "2025-11-03T05:00+00:00", timeout_s=120)
    assert "already run" in again.stdout
    bad = cycle(tmp_path, "2025-11-03T05:30+00:00", timeout_s=120)
    assert bad.returncode == 2
    assert "not a slot" in bad.stderr
