"""The real CLI with a strategy-code agent against a scripted OpenAI-compatible server on
127.0.0.1: `openbell replay` over the bundled crypto bars trades the strategy the model wrote,
`openbell leaderboard` ranks it next to a baseline, `openbell report` shows each strategy's claim
against its realised outcome, `openbell trace` shows the run, and the ledger verifies; and
`openbell run` on a fake clock over replayed hourly bars trades with the same kind of entry."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from openbell_testkit.cli import CRYPTO_1H, clean_env, cycle_rows, openbell
from openbell_testkit.jail import need_jail
from openbell_testkit.llm import ScriptedModel, completion, serve_script
from tests.acceptance.test_run import Daemon, assert_ledger_verifies

CODE = """
import pandas as pd


def strategy(bars):
    scores = {}
    for symbol, frame in bars.items():
        close = frame["close"]
        if len(close) > 10:
            scores[symbol] = close.iloc[-1] / close.iloc[-11] - 1
    best = pd.Series(scores).sort_values(ascending=False)
    return {symbol: 0.45 for symbol in list(best.index)[:2]}
"""


@pytest.fixture(autouse=True)
def _jailed() -> None:
    need_jail("strategy")


def test_replay_leaderboard_report_and_trace_of_a_strategy_code_agent(tmp_path: Path) -> None:
    claim = {"expected_return": 0.003, "hit_rate": 0.55, "rationale": "Ten-day momentum."}
    model = ScriptedModel([completion(json.dumps({"code": CODE, "claim": claim}))])
    db = tmp_path / "var" / "openbell.db"  # where assert_ledger_verifies reads it
    env = clean_env()
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{db}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
            '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\n'
            'source = "ccxt:binance"\ninitial_cash = "10000"\n\n'
            '[[agents]]\nname = "equal-weight"\nkind = "equal_weight"\nmarkets = ["crypto"]\n\n'
            '[[agents]]\nname = "coder"\nkind = "strategy_code"\nmarkets = ["crypto"]\n'
            f'base_url = "{base_url}"\nmodel = "scripted-1"\nlookback = 30\n'
            "rewrite_every = 0\nmax_retries = 2\ncpu_s = 10\nmemory_mb = 1024\n"
            'rebalance_band = "0.02"\n',
            encoding="utf-8",
        )
        replayed = openbell(
            tmp_path, "replay", "--start", "2025-11-01", "--end", "2025-11-05", env=env
        )
    assert replayed.returncode == 0, replayed.stderr
    assert "10 cycles done, 0 failed" in replayed.stdout + replayed.stderr
    assert len(model.requests) == 1  # written once, run at every cycle
    assert_ledger_verifies(tmp_path)

    board = openbell(tmp_path, "leaderboard", "--market", "crypto", "--format", "json", env=env)
    assert board.returncode == 0, board.stderr
    assert "coder" in board.stdout
    assert "equal-weight" in board.stdout

    reported = openbell(tmp_path, "report", "coder", "--market", "crypto", "--json", env=env)
    assert reported.returncode == 0, reported.stderr
    record = json.loads(reported.stdout)
    assert record["kind"] == "strategy_code"
    first = record["strategy_1"]
    assert (first["runs"], first["failed_runs"], first["periods"]) == (5, 0, 4)
    assert first["claimed_return"] == "0.003"
    assert first["return_gap"] == round(0.003 - first["realised_return"], 6)
    assert first["claimed_hit_rate"] == "0.55"
    assert "strategy_2" not in record
    table = openbell(tmp_path, "report", "coder", "--market", "crypto", env=env)
    assert table.returncode == 0, table.stderr
    assert "strategy_1" in table.stdout
    assert "realised_hit_rate" in table.stdout

    traced = openbell(tmp_path, "trace", "2", "--json", env=env)
    assert traced.returncode == 0, traced.stderr
    entries = json.loads(traced.stdout)["entries"]
    runs = [e for e in entries if e["tool"] == "strategy"]
    assert len(runs) == 1
    assert json.loads(runs[0]["result"])["outcome"] == "ok"


def test_run_trades_with_a_strategy_code_agent(tmp_path: Path) -> None:
    claim = {"hit_rate": 0.52, "rationale": "Ten-hour momentum."}
    model = ScriptedModel([completion(json.dumps({"code": CODE, "claim": claim}))])
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            '[store]\nurl = "sqlite:///var/openbell.db"\n\n[http]\nlisten = "127.0.0.1:0"\n\n'
            '[markets.crypto]\nuniverse = "crypto10"\ncadence = "hourly"\n'
            f'source = "replay:{CRYPTO_1H}"\ninitial_cash = "10000"\n\n'
            '[[agents]]\nname = "coder"\nkind = "strategy_code"\nmarkets = ["crypto"]\n'
            f'base_url = "{base_url}"\nmodel = "scripted-1"\ninterval = "1h"\nlookback = 48\n',
            encoding="utf-8",
        )
        with Daemon(tmp_path, "--fake-clock", "2025-11-03T00:59:00Z:600") as daemon:
            daemon.wait_for("slot_finished")
            daemon.wait_for("slot_finished")
            code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    done = [row for row in cycle_rows(tmp_path) if row.status == "done"]
    assert len(done) >= 2
    assert len(model.requests) == 1  # written at the first cycle, run at every one
    reported = openbell(tmp_path, "report", "coder", "--market", "crypto", "--json")
    assert reported.returncode == 0, reported.stderr
    record = json.loads(reported.stdout)
    assert record["trades"] >= 2
    assert record["strategy_1"]["runs"] >= 2
    assert record["strategy_1"]["claimed_hit_rate"] == "0.52"
    assert record["strategy_1"]["claimed_return"] is None
    assert_ledger_verifies(tmp_path)
