"""The acceptance tests' `openbell` commands forked from a zygote behave as fresh processes: the
same exit codes, output, working directory, environment and stdin; a kill is reported as one; a
start-up environment, the `fresh_processes` mark and `OPENBELL_TEST_FRESH_PROCESSES=1` get a
fresh process (`openbell_testkit.zygote`)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from openbell_testkit.cli import Daemon, clean_env, config_text, launch, openbell
from openbell_testkit.zygote import FRESH, FRESH_ENV, ForkedProcess, forking_available

pytestmark = pytest.mark.skipif(not forking_available(), reason="the zygotes need Linux's fork")


def both(cwd: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    """`openbell ARGS` forked, then fresh, in `cwd`."""
    forked = openbell(cwd, *args, env=clean_env(**env))
    FRESH.set()
    try:
        fresh = openbell(cwd, *args, env=clean_env(**env))
    finally:
        FRESH.clear()
    return forked, fresh


def test_a_forked_command_is_launched_from_a_zygote_and_a_start_up_change_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forked = launch(tmp_path, "--version")
    assert isinstance(forked, ForkedProcess)
    assert forked.communicate(timeout=60)[0].startswith("openbell ")
    for fresh in (
        launch(tmp_path, "--version", env=clean_env(PYTHONPATH=str(tmp_path))),
        launch(tmp_path, "--version", env=clean_env(LC_ALL="C")),
    ):
        assert isinstance(fresh, subprocess.Popen)
        fresh.communicate(timeout=60)
    monkeypatch.setenv(FRESH_ENV, "1")
    alone = launch(tmp_path, "--version")
    assert isinstance(alone, subprocess.Popen)
    alone.communicate(timeout=60)


def test_exit_codes_and_output_are_a_fresh_processs(tmp_path: Path) -> None:
    for args in (
        ("--version",),
        ("nosuch",),
        ("ledger", "verify", "--db", f"sqlite:///{tmp_path / 'absent.db'}"),
        ("leaderboard", "--help"),
    ):
        forked, fresh = both(tmp_path, *args, COLUMNS="90")
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode,
            fresh.stdout,
            fresh.stderr,
        ), args
    forked, _ = both(tmp_path, "nosuch")
    assert forked.returncode == 2


def test_the_working_directory_and_the_environment_are_the_requests(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    result = openbell(tmp_path / "a", "init", "--config", "here.toml")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "a" / "here.toml").is_file()
    # The config named by the environment (dropped by clean_env, set again here) is the one read.
    named = openbell(tmp_path, "config", "check", env=clean_env(OPENBELL_CONFIG="a/here.toml"))
    unnamed = openbell(tmp_path, "config", "check")
    assert named.returncode == 0, named.stderr
    assert unnamed.returncode != 0


def test_a_killed_command_reports_the_signal(tmp_path: Path) -> None:
    text = config_text(**{'listen = "127.0.0.1:8787"': 'listen = "127.0.0.1:0"'})
    (tmp_path / "openbell.toml").write_text(text, encoding="utf-8")
    with Daemon(tmp_path, "--fake-clock", "2026-12-01T21:30:00Z", "--heartbeat-s", "0.2") as daemon:
        assert isinstance(daemon.process, ForkedProcess)
        daemon.wait_for("daemon_started")
        daemon.process.send_signal(signal.SIGKILL)
        assert daemon.process.wait(timeout=30) == -signal.SIGKILL
