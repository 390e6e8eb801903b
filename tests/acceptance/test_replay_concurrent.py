"""Two `openbell replay` runs of the same accounts on one ledger: exactly one runs.

Two real console scripts start at nearly the same time on one fresh SQLite file, and on one fresh
Postgres schema, replaying the same months of A-share sessions with the same baselines. One runs
to the end; the other is refused before it writes anything, with exit 2 and one line naming the
conflict. The ledger left behind equals that of a single run into a ledger of its own, table by
table (only the claim bookkeeping may differ), and `openbell ledger verify` passes on it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import openbell.store.tables  # registers the tables on SQLModel.metadata
from openbell_testkit.cli import (
    BASELINE_KINDS,
    TIMEOUT_S,
    clean_env,
    openbell,
    openbell_command,
    write_cn_baselines_config,
)
from openbell_testkit.store import dump_ledger

START, END = "2025-03-03", "2025-11-19"
SESSIONS = 177  # XSHG sessions from 2025-03-03 through 2025-11-19
AGENTS = BASELINE_KINDS
CYCLES = SESSIONS * len(AGENTS)
#: Claim bookkeeping: which run held a cycle and when; the rest of the ledger must be identical.


def _config(workdir: Path, name: str, url: str) -> Path:
    # The SSE-50 index's bundled bars end on 2025-11-07, eight sessions before END.
    return write_cn_baselines_config(workdir / f"{name}.toml", url, allow_partial_coverage=True)


def _replay_args(config: Path) -> list[str]:
    return ["replay", "--config", str(config), "--start", START, "--end", END, "--no-progress"]


def _url(kind: str, tmp_path: Path, name: str, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{(tmp_path / 'state' / f'{name}.db').as_posix()}"
    server = request.getfixturevalue("pg_server")
    url: str = server.fresh_schema_url()
    return url


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_second_replay_of_the_same_accounts_is_refused(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    shared_url = _url(kind, tmp_path, "shared", request)
    shared = _config(tmp_path, "shared", shared_url)
    command = [*openbell_command(), *_replay_args(shared)]
    processes = [
        subprocess.Popen(
            command,
            cwd=tmp_path,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=4 * TIMEOUT_S)
            results.append((process.returncode, out, err))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()

    codes = sorted(code for code, _out, _err in results)
    assert codes == [0, 2], results
    (_, ran_out, ran_err), (_, refused_out, refused_err) = sorted(results, key=lambda r: r[0])
    assert f"replayed {SESSIONS} slots" in ran_out, ran_err
    assert f"{CYCLES} cycles done, 0 failed" in ran_out
    assert refused_out == ""
    assert "Traceback" not in refused_err
    # Beside the window's coverage warning (a JSON log line), one error line.
    lines = [line for line in refused_err.splitlines() if not line.startswith("{")]
    assert len(lines) == 1, refused_err
    assert lines[0].startswith("openbell: error: another openbell replay"), lines[0]

    single_url = _url(kind, tmp_path, "single", request)
    single = _config(tmp_path, "single", single_url)
    alone = openbell(tmp_path, *_replay_args(single), timeout_s=4 * TIMEOUT_S)
    assert alone.returncode == 0, alone.stderr
    expected, found = dump_ledger(single_url), dump_ledger(shared_url)
    assert len(expected["cycle"]) == CYCLES
    assert expected["fill"]
    for table in expected:
        assert found[table] == expected[table], table

    verified = openbell(tmp_path, "ledger", "verify", "--config", str(shared))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("ledger ok:")
