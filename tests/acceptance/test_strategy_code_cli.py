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

#: Fresh `openbell` processes, never forked from a zygote:
#: strategies read /proc for the process's environment.
pytestmark = pytest.mark.fresh_processes

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


#: Hostile answers a model may give, in the order the scripted model gives them: frames walked
#: from a generator up to the child's builtins (the escape of issue 23), the same through a
#: format string, and two look-ahead rewrites the check used to pass.
HOSTILE = {
    "frame walk": """
def strategy(bars):
    def climb():
        frame = gen.gi_frame
        while frame.f_back is not None:
            frame = frame.f_back
        yield frame
    gen = climb()
    top = next(gen)
    opener = top.f_builtins["op" + "en"]
    raise ValueError(opener("/proc/self/environ").read()[::-1])
""",
    "format string": """
def strategy(bars):
    gen = (x for x in [1])
    raise ValueError("{0.gi_frame.f_globals}".format(gen))
""",
    "next row": """
def strategy(bars):
    out = {}
    for symbol, frame in bars.items():
        close = frame["close"]
        for i in range(len(close) - 1):
            j = i + 1
            if close.iloc[j] > close.iloc[i]:
                out[symbol] = 0.1
    return out
""",
    "centred by position": """
def strategy(bars):
    return {s: 0.1 for s, f in bars.items() if f["close"].rolling(5, 1, True).mean().iloc[-1] > 0}
""",
}
WHY = {
    "frame walk": ".gi_frame is forbidden [io]",
    "format string": "'{0.gi_frame.f_globals}' is forbidden [io]",
    "next row": "reads a later row than i [future_index]",
    "centred by position": "a centred rolling window sees later rows [centered_window]",
}
SECRET = "sk-live-7Hq2Zr9Lw4XvK8"  # noqa: S105  (a made-up key)


def test_a_replay_refuses_hostile_strategy_code_before_it_runs_and_goes_on(
    tmp_path: Path,
) -> None:
    """Each hostile answer is refused by the static check (never run: no trial, no error from
    it), the model is told why and answers again, and the replay trades the clean strategy."""
    claim = {"expected_return": 0.001, "rationale": "Ten-day momentum."}
    answers = [*HOSTILE.values(), CODE]
    model = ScriptedModel(
        [completion(json.dumps({"code": code, "claim": claim})) for code in answers]
    )
    db = tmp_path / "var" / "openbell.db"
    env = clean_env(OPENBELL_TEST_CODER_KEY=SECRET)
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{db}"\n\n[log]\nformat = "console"\nlevel = "info"\n\n'
            '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\n'
            'source = "ccxt:binance"\ninitial_cash = "10000"\n\n'
            '[[agents]]\nname = "coder"\nkind = "strategy_code"\nmarkets = ["crypto"]\n'
            f'base_url = "{base_url}"\nmodel = "scripted-1"\nlookback = 30\n'
            'api_key_env = "OPENBELL_TEST_CODER_KEY"\n'
            f"rewrite_every = 0\nmax_retries = {len(HOSTILE)}\ncpu_s = 10\nmemory_mb = 1024\n",
            encoding="utf-8",
        )
        replayed = openbell(
            tmp_path, "replay", "--start", "2025-11-01", "--end", "2025-11-03", env=env
        )
    assert replayed.returncode == 0, replayed.stderr
    assert "3 cycles done, 0 failed" in replayed.stdout + replayed.stderr
    assert len(model.requests) == len(HOSTILE) + 1
    for number, name in enumerate(HOSTILE, start=1):
        told = model.requests[number]["messages"][-1]["content"]
        assert told.startswith("Refused: the code was refused by the look-ahead and I/O check"), (
            name
        )
        assert WHY[name] in told, (name, told)
    assert_ledger_verifies(tmp_path)

    traced = openbell(tmp_path, "trace", "1", "--json", env=env)
    assert traced.returncode == 0, traced.stderr
    entries = json.loads(traced.stdout)["entries"]
    runs = [json.loads(entry["result"]) for entry in entries if entry["tool"] == "strategy"]
    assert [run["outcome"] for run in runs] == ["ok"]  # no hostile answer ever ran
    reported = openbell(tmp_path, "report", "coder", "--market", "crypto", "--json", env=env)
    assert reported.returncode == 0, reported.stderr
    first = json.loads(reported.stdout)["strategy_1"]
    assert (first["runs"], first["failed_runs"]) == (3, 0)
    outputs = (
        replayed.stdout
        + replayed.stderr
        + traced.stdout
        + reported.stdout
        + db.read_text(encoding="latin-1")
    )
    assert SECRET not in outputs
    assert SECRET[::-1] not in outputs
