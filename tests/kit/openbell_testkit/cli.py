"""The real `openbell` console script in a subprocess, for the acceptance tests.

`openbell(cwd, *args)` runs one command to its end; `Daemon` runs `openbell run` in the background
and parses its stdout lines as they arrive. The environment is the test's, without the variables
that would point the CLI at a real config or systemd, and offline (`OPENBELL_OFFLINE=1`). Both start
the command with `launch`: forked from a warm zygote where that is the same as a fresh process,
a fresh process otherwise (`openbell_testkit.zygote` says when).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Collection
from importlib import resources
from pathlib import Path
from typing import Any, Self

import pytest
from sqlmodel import Session, select

from openbell.ops.config.schema import default_config_text
from openbell.store import tables
from openbell.store.db import make_engine
from openbell.store.verify import verify_ledger
from openbell_testkit.offline import closed_port
from openbell_testkit.zygote import FRESH, FRESH_ENV, ForkedProcess, Zygotes, forking_available

#: The bundled crypto hourly bars, a `replay:` source for a config.
CRYPTO_1H = Path(
    str(resources.files("openbell.markets").joinpath("data", "bars", "crypto-1h.parquet"))
)
TIMEOUT_S = 60
STOP_WITHIN_S = 5


def openbell_command() -> list[str]:
    """The installed console script next to this interpreter, or the module as a fallback."""
    script = shutil.which("openbell", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "openbell.ops.cli"]


def clean_env(*, without: Collection[str] = (), **extra: str) -> dict[str, str]:
    """The test's environment without a config or systemd (and `without`), offline, plus `extra`."""
    dropped = {"OPENBELL_CONFIG", "NOTIFY_SOCKET", *without}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["OPENBELL_OFFLINE"] = "1"  # live sources never reach a vendor from a test
    env.update(extra)
    return env


#: The zygotes of this test process, started with the environment `clean_env()` gives at import.
ZYGOTES = Zygotes(clean_env())


def launch(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str] | ForkedProcess:
    """`openbell ARGS` started in `cwd` with stdout and stderr piped (text): forked from a zygote
    when that is the same as a fresh process (an environment the zygotes serve, the console
    script, no `fresh_processes` mark, no `OPENBELL_TEST_FRESH_PROCESSES=1`), fresh otherwise."""
    argv = [*openbell_command(), *args]
    env = env or clean_env()
    if (
        forking_available()
        and not FRESH.is_set()
        and os.environ.get(FRESH_ENV) != "1"
        and Path(argv[0]).name == "openbell"
        and ZYGOTES.serves(env)
    ):
        return ZYGOTES.fork(argv, cwd, env)
    return subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def openbell(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout_s: float = TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """`openbell ARGS` run to its end in `cwd`, its output captured (as `subprocess.run`)."""
    process = launch(cwd, *args, env=env)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    assert process.returncode is not None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def assert_one_error_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("openbell: error: "), lines[0]
    for word in words:
        assert word in lines[0]
    return lines[0]


def config_text(**replacements: str) -> str:
    text = default_config_text()
    for old, new in replacements.items():
        assert old in text
        text = text.replace(old, new, 1)
    return text


#: The baseline kinds the replay acceptance tests enrol, each under its own kind as its name.
BASELINE_KINDS = ("buy_and_hold", "equal_weight", "sma_crossover", "cash", "random")


def write_cn_baselines_config(
    path: Path, url: str, *, allow_partial_coverage: bool = False
) -> Path:
    """Write at `path` a config that replays the SSE 50 daily (source `akshare`: the bundled
    daily bars in a replay) into the ledger at `url` with every baseline; return `path`.

    The windows these tests replay lie before the dates sse50.toml vouches for (2025-09-30 on),
    so the config allows them (`allow_outside_coverage`). `allow_partial_coverage` allows a
    window in which a member's (or the index's) bundled bars start late or stop early.
    """
    agents = "".join(
        f'[[agents]]\nname = "{kind}"\nkind = "{kind}"\nmarkets = ["cn"]\n'
        + ("seed = 7\n" if kind == "random" else "")
        for kind in BASELINE_KINDS
    )
    path.write_text(
        f'[store]\nurl = "{url}"\n\n'
        '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
        'initial_cash = "100000"\nallow_outside_coverage = true\n'
        + ("allow_partial_coverage = true\n" if allow_partial_coverage else "")
        + "\n"
        + agents,
        encoding="utf-8",
    )
    return path


def cycle(
    cwd: Path,
    at: str,
    *options: str,
    market: str = "crypto",
    agent: str = "random",
    timeout_s: float = TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """`openbell cycle` of `agent` in `market` at `at`, with further `options`."""
    command = ("cycle", "--market", market, "--agent", agent, "--at", at, *options)
    return openbell(cwd, *command, timeout_s=timeout_s)


#: A loopback port free at the time of asking (nothing listens on it).
free_port = closed_port


class Daemon:
    """`openbell run ARGS` in the background, its stdout lines parsed as they arrive.

    `stop_within_s` bounds how long a stop (or the kill on exit) may take; `env` replaces the
    clean environment (to give it a `NOTIFY_SOCKET`, say).
    """

    def __init__(
        self,
        cwd: Path,
        *args: str,
        stop_within_s: float = STOP_WITHIN_S,
        env: dict[str, str] | None = None,
    ) -> None:
        self.stop_within_s = stop_within_s
        self.process = launch(cwd, "run", *args, env=env)
        self.lines: list[str] = []
        self._events: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=self.stop_within_s)
        self._reader.join(timeout=5)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            try:
                self._events.put(json.loads(line).get("event", ""))
            except json.JSONDecodeError:
                self._events.put("")

    def wait_for(self, event: str, timeout_s: float = TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                if self._events.get(timeout=left) == event:
                    return
            except queue.Empty:
                break
        pytest.fail(f"no {event} within {timeout_s}s; last stdout lines: {self.lines[-20:]}")

    def stop(self, signum: signal.Signals) -> tuple[int, float, str]:
        """Send `signum`; return the exit code, the seconds it took and stderr."""
        sent = time.monotonic()
        self.process.send_signal(signum)
        code = self.process.wait(timeout=self.stop_within_s)
        elapsed_s = time.monotonic() - sent
        self._reader.join(timeout=5)
        assert self.process.stderr is not None
        return code, elapsed_s, self.process.stderr.read()

    def records(self, *, json_only: bool = False) -> list[dict[str, Any]]:
        """Every stdout line parsed as JSON (`json_only`: skipping lines that are not objects)."""
        return [json.loads(line) for line in self.lines if not json_only or line.startswith("{")]


def cycle_rows(cwd: Path) -> list[tables.CycleRow]:
    """The cycles in the ledger of a config's default store (`var/openbell.db` under `cwd`)."""
    engine = make_engine(f"sqlite:///{cwd / 'var' / 'openbell.db'}")
    try:
        with Session(engine) as session:
            return list(session.exec(select(tables.CycleRow)).all())
    finally:
        engine.dispose()


def assert_ledger_verifies(cwd: Path, *, timeout_s: float = TIMEOUT_S) -> None:
    """The ledger under `cwd` verifies, read directly and through `openbell ledger verify`."""
    engine = make_engine(f"sqlite:///{cwd / 'var' / 'openbell.db'}")
    try:
        report = verify_ledger(engine)
    finally:
        engine.dispose()
    assert report.ok, report.lines()
    result = openbell(cwd, "ledger", "verify", timeout_s=timeout_s)
    assert result.returncode == 0, result.stdout + result.stderr
