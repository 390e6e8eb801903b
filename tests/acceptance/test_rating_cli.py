"""The real CLI with a rating agent against a scripted OpenAI-compatible server on 127.0.0.1:
`openbell replay` over the bundled crypto bars trades the ratings, `openbell leaderboard` ranks
the agent next to a baseline, `openbell report` shows the calibration of its ratings, `openbell
trace` shows the ratings table, and the ledger verifies; and `openbell run` on a fake clock over
replayed hourly bars trades with the same kind of entry."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

from openbell.agents.rating.quality_judge import RUBRIC
from openbell.agents.rating.report import SECTIONS
from openbell_testkit.cli import CRYPTO_1H, clean_env, cycle_rows, openbell
from openbell_testkit.compare import TABLES, ledger_rows
from openbell_testkit.llm import ScriptedModel, completion, serve_script
from tests.acceptance.test_run import Daemon, assert_ledger_verifies

STEPS = ("strong_buy", "buy", "hold", "sell", "strong_sell")


def analyst(body: dict[str, Any]) -> dict[str, Any]:
    """Rates the offered symbols in turn down the scale (alphabetical order)."""
    symbols = re.findall(r"^([A-Z0-9]+/[A-Z]+): ", body["messages"][1]["content"], re.MULTILINE)
    ratings = [
        {"symbol": symbol, "rating": STEPS[i % 5], "confidence": 0.6, "rationale": "In turn."}
        for i, symbol in enumerate(symbols)
    ]
    return completion(json.dumps({"ratings": ratings}))


def entry(base_url: str) -> str:
    return (
        '[[agents]]\nname = "analyst"\nkind = "rating"\nmarkets = ["crypto"]\n'
        f'base_url = "{base_url}"\nmodel = "scripted-1"\n'
    )


def test_replay_leaderboard_report_and_trace_of_a_rating_agent(tmp_path: Path) -> None:
    model = ScriptedModel([analyst] * 5)
    db = tmp_path / "var" / "openbell.db"  # where assert_ledger_verifies reads it
    env = clean_env()
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{db}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
            '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\n'
            'source = "ccxt:binance"\ninitial_cash = "10000"\n\n'
            '[[agents]]\nname = "equal-weight"\nkind = "equal_weight"\nmarkets = ["crypto"]\n\n'
            + entry(base_url)
            + 'lookback = 10\nmax_weight = "0.3"\n',
            encoding="utf-8",
        )
        replayed = openbell(
            tmp_path, "replay", "--start", "2025-11-01", "--end", "2025-11-05", env=env
        )
    assert replayed.returncode == 0, replayed.stderr
    assert "10 cycles done, 0 failed" in replayed.stdout + replayed.stderr
    assert len(model.requests) == 5  # one report a cycle
    assert_ledger_verifies(tmp_path)

    board = openbell(tmp_path, "leaderboard", "--market", "crypto", "--format", "json", env=env)
    assert board.returncode == 0, board.stderr
    assert "analyst" in board.stdout

    reported = openbell(tmp_path, "report", "analyst", "--market", "crypto", "--json", env=env)
    assert reported.returncode == 0, reported.stderr
    record = json.loads(reported.stdout)
    assert record["kind"] == "rating"
    assert record["rating_pairs"] == 40  # ten symbols, four reports with a next slot
    assert record["rating_strong_buy_count"] == 8
    assert record["rating_rank_correlation"] is not None
    table = openbell(tmp_path, "report", "analyst", "--market", "crypto", env=env)
    assert table.returncode == 0, table.stderr
    (line,) = [row for row in table.stdout.splitlines() if "rating_buy_hit_rate" in row]
    assert line.rstrip(" │").endswith("%")  # a share, shown as a percentage

    traced = openbell(tmp_path, "trace", "2", env=env)
    assert traced.returncode == 0, traced.stderr
    assert "ratings" in traced.stdout
    assert "strong buy" in traced.stdout
    assert "In turn." in traced.stdout


def test_run_trades_with_a_rating_agent(tmp_path: Path) -> None:
    model = ScriptedModel([analyst] * 20)
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            '[store]\nurl = "sqlite:///var/openbell.db"\n\n[http]\nlisten = "127.0.0.1:0"\n\n'
            '[markets.crypto]\nuniverse = "crypto10"\ncadence = "hourly"\n'
            f'source = "replay:{CRYPTO_1H}"\ninitial_cash = "10000"\n\n'
            + entry(base_url)
            + 'interval = "1h"\nlookback = 24\n',
            encoding="utf-8",
        )
        with Daemon(tmp_path, "--fake-clock", "2025-11-03T00:59:00Z:600") as daemon:
            daemon.wait_for("slot_finished")
            daemon.wait_for("slot_finished")
            code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    done = [row for row in cycle_rows(tmp_path) if row.status == "done"]
    assert len(done) >= 2
    reported = openbell(tmp_path, "report", "analyst", "--market", "crypto", "--json")
    assert reported.returncode == 0, reported.stderr
    record = json.loads(reported.stdout)
    assert record["trades"] >= 2
    assert record["rating_pairs"] > 0  # the reports before the last, every symbol with bars
    assert_ledger_verifies(tmp_path)


def insights_analyst(body: dict[str, Any]) -> dict[str, Any]:
    """One server for the rater and its judge: the judge (told by its system prompt) finds the
    first half of the rubric met; the rater rates as `analyst`, with the eight sections, on an
    account allowed to short."""
    if body["messages"][0]["content"].startswith("You are a strict reviewer"):
        marks = [True, True, False, False]
        verdict = {name: marks for name in RUBRIC}
        return completion(json.dumps({**verdict, "rationale": "half"}))
    found = json.loads(analyst(body)["choices"][0]["message"]["content"])
    for rating in found["ratings"]:
        rating["report"] = {name: f"{name} of {rating['symbol']}" for name in SECTIONS}
    return completion(json.dumps(found))


def test_market_insights_reports_judged_and_regressed_through_the_cli(tmp_path: Path) -> None:
    model = ScriptedModel([insights_analyst] * 200)
    db = tmp_path / "var" / "openbell.db"
    env = clean_env()
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{db}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
            '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\n'
            'source = "ccxt:binance"\ninitial_cash = "10000"\n\n'
            + entry(base_url)
            + 'allow_short = true\nlookback = 5\nreport = "insights"\n\n'
            + f'[agents.judge]\nbase_url = "{base_url}"\nmodel = "judge-1"\n',
            encoding="utf-8",
        )
        replayed = openbell(
            tmp_path, "replay", "--start", "2025-11-01", "--end", "2025-11-03", env=env
        )
    assert replayed.returncode == 0, replayed.stderr
    assert_ledger_verifies(tmp_path)
    reported = openbell(tmp_path, "report", "analyst", "--market", "crypto", "--json", env=env)
    assert reported.returncode == 0, reported.stderr
    record = json.loads(reported.stdout)
    # Half of each dimension met: 5 out of 10 on every report.
    assert record["report_quality"] == 5.0
    assert set(record["report_quality_by_symbol"].values()) == {5.0}
    assert len(record["rating_return_by_symbol"]) == 10
    # One agent, one model: the fixed effects leave nothing to estimate the slope from.
    assert record["quality_return_units"] == 10
    assert record["quality_return_slope"] is None
    assert record["quality_return_effects"] == "asset, backbone"
    assert record["trades"] > 0
    table = openbell(tmp_path, "report", "analyst", "--market", "crypto", env=env)
    assert table.returncode == 0, table.stderr
    assert "report_quality" in table.stdout
    assert "quality_return_slope" in table.stdout


def test_a_rating_agent_reruns_from_its_recorded_answers_with_no_model_server(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([analyst] * 5)
    original = tmp_path / "original.db"
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{original}"\n\n[log]\nlevel = "warning"\n\n'
            '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\n'
            'source = "ccxt:binance"\ninitial_cash = "10000"\n\n' + entry(base_url),
            encoding="utf-8",
        )
        window = ("--start", "2025-11-01", "--end", "2025-11-05")
        replayed = openbell(tmp_path, "replay", *window, env=clean_env())
        assert replayed.returncode == 0, replayed.stderr
    asked = len(model.requests)
    rerun = tmp_path / "rerun.db"
    again = openbell(
        tmp_path, "replay", *window, "--answers", str(original), "--db", str(rerun), env=clean_env()
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "5 cycles done, 0 failed" in again.stdout + again.stderr
    assert len(model.requests) == asked  # the server is gone; nothing reached it
    first, second = ledger_rows(original), ledger_rows(rerun)
    for table in TABLES:
        assert second[table] == first[table], table
    assert [name for name, _ in first["fill"]].count("analyst") > 0
