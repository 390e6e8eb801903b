"""The hedge mode through the real CLI (issue 25 item 2): `openbell replay` of the bundled US bars
with a hedger whose scripted model (on 127.0.0.1) picks AAPL/MSFT, goes long-short and closes;
`openbell ledger verify` passes, `openbell trace` shows the legs the mode placed, and `openbell
report` shows the hedger's long-short exposure."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from openbell_testkit.cli import clean_env, openbell
from openbell_testkit.llm import ScriptedModel, completion, serve_script
from tests.acceptance.test_run import assert_ledger_verifies

ANSWERS = {
    "2025-10-01": {"pair": ["AAPL", "MSFT"], "action": "long-short", "reason": "spread"},
    "2025-10-02": {"action": "hold"},
    "2025-10-03": {"action": "close"},
}


def hedger(body: dict[str, Any]) -> dict[str, Any]:
    day = re.search(r"Now: (\d{4}-\d{2}-\d{2})", body["messages"][1]["content"])
    assert day is not None
    return completion(json.dumps(ANSWERS[day.group(1)]))


def test_a_hedger_replays_verifies_and_is_traced_and_reported(tmp_path: Path) -> None:
    model = ScriptedModel([hedger] * 10)
    db = tmp_path / "var" / "openbell.db"
    env = clean_env()
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{db}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
            '[markets.us]\nuniverse = "nasdaq100"\ncadence = "daily"\nsource = "yfinance"\n'
            'initial_cash = "10000"\n\n'
            '[[agents]]\nname = "hedger"\nkind = "llm"\nmode = "hedge"\nmarkets = ["us"]\n'
            f'allow_short = true\nbase_url = "{base_url}"\nmodel = "scripted-1"\n',
            encoding="utf-8",
        )
        replayed = openbell(
            tmp_path, "replay", "--start", "2025-10-01", "--end", "2025-10-03", env=env
        )
    assert replayed.returncode == 0, replayed.stderr
    assert "3 cycles done, 0 failed" in replayed.stdout + replayed.stderr
    assert len(model.requests) == 3  # one answer a cycle, no research asked for
    assert_ledger_verifies(tmp_path)

    traced = openbell(tmp_path, "trace", "1", "--json", env=env)
    assert traced.returncode == 0, traced.stderr
    placed = [
        json.loads(entry["arguments"])
        for entry in json.loads(traced.stdout)["entries"]
        if entry["tool"] == "place_order"
    ]
    assert [(p["symbol"], p["side"], p["target_weight"]) for p in placed] == [
        ("MSFT", "short", "0.5"),
        ("AAPL", "buy", "0.5"),
    ]
    assert placed[0]["reason"] == "hedge AAPL vs MSFT: long-short: spread"

    reported = openbell(tmp_path, "report", "hedger", "--market", "us", "--json", env=env)
    assert reported.returncode == 0, reported.stderr
    record = json.loads(reported.stdout)
    assert record["trades"] == 4  # two legs opened, two closed
    # Held hedged over two of the three slots (gross about 1), flat at the last: mean about 2/3.
    assert record["mean_gross_exposure"] == pytest.approx(2 / 3, abs=0.05)
    assert abs(record["mean_net_exposure"]) < 0.05
