"""The real CLI with a fixed-candidate LLM agent against a scripted server on 127.0.0.1 whose
first answers each cycle cannot be used: `openbell replay` counts every one of them as a parse
failure, and `openbell report` and `openbell trace` show the count."""

from __future__ import annotations

import json
from pathlib import Path

from openbell.agents.modes.final_action import FEEDBACK_PREFIX
from openbell_testkit.cli import openbell
from openbell_testkit.llm import Body, ScriptedModel, completion, serve_script

FAILED_PER_CYCLE = 2
CYCLES = 3


def fails_twice_then_holds(body: Body) -> Body:
    """Each cycle: an answer with no JSON, then one with an unknown side, then a hold with
    KTD-Fin's `overall_reason`."""
    refused = sum(
        1
        for message in body["messages"]
        if message["role"] == "user" and message["content"].startswith(FEEDBACK_PREFIX)
    )
    if refused == 0:
        return completion("I would rather wait and see.")
    if refused == 1:
        order = {"stock_id": "601398.SH", "side": "short", "shares": 100, "reason": "r"}
        return completion(json.dumps({"orders": [order]}))
    return completion(json.dumps({"orders": [], "overall_reason": "Nothing stands out."}))


def test_replay_and_report_count_the_refused_answers(tmp_path: Path) -> None:
    model = ScriptedModel([fails_twice_then_holds] * 100)
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{tmp_path / "ledger.db"}"\n\n'
            '[log]\nformat = "console"\nlevel = "warning"\n\n'
            '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
            'initial_cash = "100000"\n\n'
            '[[agents]]\nname = "fixed"\nkind = "llm"\nmarkets = ["cn"]\n'
            f'base_url = "{base_url}"\nmodel = "scripted-1"\nmode = "fixed-candidate"\n',
            encoding="utf-8",
        )
        replayed = openbell(tmp_path, "replay", "--start", "2025-10-13", "--end", "2025-10-15")
    assert replayed.returncode == 0, replayed.stderr
    assert f"{CYCLES} cycles done, 0 failed" in replayed.stdout + replayed.stderr
    assert len(model.requests) == CYCLES * (FAILED_PER_CYCLE + 1)

    reported = openbell(tmp_path, "report", "fixed", "--market", "cn", "--json")
    assert reported.returncode == 0, reported.stderr
    record = json.loads(reported.stdout)
    assert record["llm_decisions"] == CYCLES
    assert (record["parse_failures"], record["invalid_tool_calls"]) == (
        CYCLES * FAILED_PER_CYCLE,
        0,
    )
    # As rates: of the model's answers (every request was answered), and of the tool calls
    # traced (each cycle's `finish`, none invalid).
    assert record["parse_failure_rate"] == FAILED_PER_CYCLE / (FAILED_PER_CYCLE + 1)
    assert (record["tool_calls"], record["tool_validity_rate"]) == (CYCLES, 1.0)
    table = openbell(tmp_path, "report", "fixed", "--market", "cn")
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if "parse_failures" in line)
    assert str(CYCLES * FAILED_PER_CYCLE) in row
    rate = next(line for line in table.stdout.splitlines() if "parse_failure_rate" in line)
    assert "66.67" in rate

    traced = openbell(tmp_path, "trace", "1")
    assert traced.returncode == 0, traced.stderr
    assert f"parse failures {FAILED_PER_CYCLE}" in traced.stdout
    assert "Nothing stands out." in traced.stdout
