"""The real `openbell serve` in a subprocess: it serves a ledger read-only until SIGTERM (exit 0),
honours `[http] read_token_env` (an unset variable is an error), and refuses a missing file, a file
that is not a ledger and a port in use with one line each."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

from openbell.store.migrate import upgrade
from openbell_testkit.cli import (
    assert_one_error_line,
    clean_env,
    free_port,
    openbell,
    openbell_command,
)

TOKEN = "serve-test-token-0123456789"  # noqa: S105 (a test token)
CONFIG = """
[store]
url = "sqlite:///var/openbell.db"

[http]
listen = "127.0.0.1:8787"
read_token_env = "OPENBELL_READ_TOKEN"

[markets.crypto]
universe = "crypto10"
cadence = "daily"
source = "bundled"
initial_cash = "10000"

[[agents]]
name = "cash"
kind = "cash"
markets = ["crypto"]
"""


def ledger(tmp_path: Path) -> Path:
    db = tmp_path / "ledger.db"
    upgrade(f"sqlite:///{db}")
    return db


def wait_until_listening(port: int, process: subprocess.Popen[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"openbell serve did not listen on {port} within {timeout_s} s")


def test_serve_answers_behind_the_read_token_and_stops_on_sigterm(tmp_path: Path) -> None:
    db = ledger(tmp_path)
    (tmp_path / "openbell.toml").write_text(CONFIG)
    before = db.read_bytes()
    port = free_port()
    process = subprocess.Popen(
        [*openbell_command(), "serve", "--db", str(db), "--listen", f"127.0.0.1:{port}"],
        cwd=tmp_path,
        env=clean_env(OPENBELL_READ_TOKEN=TOKEN),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until_listening(port, process)
        base = f"http://127.0.0.1:{port}"
        bare = httpx.get(f"{base}/api/v1/markets")
        with_token = httpx.get(f"{base}/nothing", headers={"Authorization": f"Bearer {TOKEN}"})
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        # /healthz needs no token; nobody writes this ledger, so the pages are not "live"...
        health = httpx.get(f"{base}/healthz")
        page = httpx.get(f"{base}/", headers=bearer).text
        # ... until a live daemon holds its lock (this test's process, named as one).
        Path(f"{db}.lock").write_text(f"{os.getpid()} daemon")
        health_live = httpx.get(f"{base}/healthz").json()
        page_live = httpx.get(f"{base}/", headers=bearer).text
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert bare.status_code == 401
    assert with_token.status_code == 404
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "role": "serve", "daemon_writes": False, "markets": {}}
    assert 'class="read-only"' in page
    assert 'class="live"' not in page
    assert health_live["daemon_writes"] is True
    assert 'class="live"' in page_live
    assert "serving" in err
    assert TOKEN not in err
    assert db.read_bytes() == before  # read-only: not a byte changed


def test_serve_refuses_a_missing_file_and_a_file_that_is_not_a_ledger(tmp_path: Path) -> None:
    missing = openbell(tmp_path, "serve", "--db", str(tmp_path / "nope.db"))
    assert missing.returncode == 2
    assert_one_error_line(missing, "nope.db", "no such file")
    text = tmp_path / "notes.db"
    text.write_text("not a database at all, just some text " * 200)
    not_sqlite = openbell(tmp_path, "serve", "--db", str(text))
    assert not_sqlite.returncode == 2
    assert_one_error_line(not_sqlite, "not a database")
    empty = tmp_path / "empty.db"
    empty.touch()
    unmigrated = openbell(tmp_path, "serve", "--db", str(empty))
    assert unmigrated.returncode == 2
    assert_one_error_line(unmigrated, "openbell db upgrade")


def test_serve_refuses_a_read_token_variable_that_is_not_set(tmp_path: Path) -> None:
    db = ledger(tmp_path)
    (tmp_path / "openbell.toml").write_text(CONFIG)
    unset = openbell(tmp_path, "serve", "--db", str(db), "--listen", "127.0.0.1:0")
    assert unset.returncode == 2
    assert_one_error_line(unset, "OPENBELL_READ_TOKEN is not set", "[http] read_token_env")


def test_serve_refuses_a_port_in_use_and_a_bad_listen(tmp_path: Path) -> None:
    db = ledger(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        taken = openbell(tmp_path, "serve", "--db", str(db), "--listen", f"127.0.0.1:{port}")
    assert taken.returncode == 2
    assert_one_error_line(taken, f"127.0.0.1:{port}", "cannot listen there", "--listen")
    bad = openbell(tmp_path, "serve", "--db", str(db), "--listen", "localhost")
    assert bad.returncode == 2
    assert_one_error_line(bad, "--listen localhost", "HOST:PORT")
    remote = openbell(tmp_path, "serve", "--db", str(db), "--listen", "0.0.0.0:0")
    assert remote.returncode == 2
    assert_one_error_line(remote, "not a loopback address")
