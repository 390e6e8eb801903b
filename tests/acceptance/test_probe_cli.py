"""`openbell probe deanon`, the real CLI against a model served on 127.0.0.1: every level by
default, one with --level, JSON and table output, the agent's key sent, and nothing written (no
ledger); a wrong agent is one error line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openbell_testkit.cli import assert_one_error_line, clean_env, openbell
from openbell_testkit.llm import Body, ScriptedModel, completion, serve_script

KEY = "sk-probe-acceptance-0123456789"


def reader(body: Body) -> Body:
    """A model that names what it is shown: the series' symbol and its last bar's date text."""
    text = body["messages"][-1]["content"]
    shown, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
    last = shown["bars"][-1]["start_at"]
    return completion(json.dumps({"symbol": shown["symbol"], "date": last[:10]}))


def write_config(tmp_path: Path, base_url: str) -> Path:
    (tmp_path / "openbell.toml").write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "var" / "ledger.db"}"\n\n'
        '[log]\nformat = "console"\nlevel = "warning"\n\n'
        '[markets.us]\nuniverse = "nasdaq100"\ncadence = "hourly"\nsource = "yfinance"\n'
        'initial_cash = "10000"\n\n'
        '[[agents]]\nname = "buy-and-hold"\nkind = "buy_and_hold"\nmarkets = ["us"]\n\n'
        '[[agents]]\nname = "masked-llm"\nkind = "llm"\nmarkets = ["us"]\n'
        f'base_url = "{base_url}"\nmodel = "scripted-1"\napi_key_env = "OPENBELL_TEST_LLM_KEY"\n'
        'masking = "stock-blind"\nmasking_seed = 3\n',
        encoding="utf-8",
    )
    return tmp_path / "var" / "ledger.db"


def levels_of(record: dict[str, Any]) -> dict[str, Any]:
    return {level["level"]: level for level in record["levels"]}


def test_probe_deanon_prints_recovery_per_level_and_writes_nothing(tmp_path: Path) -> None:
    model = ScriptedModel([reader] * 100)
    env = clean_env(OPENBELL_TEST_LLM_KEY=KEY)
    args = ("probe", "deanon", "--agent", "masked-llm", "--market", "us", "--trials", "6",
            "--lookback", "3")  # fmt: skip
    with serve_script(model) as base_url:
        db = write_config(tmp_path, base_url)
        as_json = openbell(tmp_path, *args, "--format", "json", env=env)
        table = openbell(tmp_path, *args, "--level", "blinded", env=env)
    assert as_json.returncode == 0, as_json.stderr
    record = json.loads(as_json.stdout)
    assert (record["agent"], record["model"], record["interval"]) == (
        "masked-llm",
        "scripted-1",
        "1h",
    )
    assert (record["trials"], record["symbols"]) == (6, 101)
    levels = levels_of(record)
    assert list(levels) == ["bright", "stock-blind", "date-blind", "blinded"]
    # The reader names what is real on its screen, and nothing else.
    assert levels["bright"]["symbol"]["hits"] == levels["bright"]["date"]["hits"] == 6
    assert levels["stock-blind"]["symbol"]["hits"] == 0
    assert levels["stock-blind"]["date"]["hits"] == 6
    assert levels["date-blind"]["symbol"]["hits"] == 6
    assert levels["date-blind"]["date"]["hits"] == 0
    assert levels["blinded"]["rebased"] is True
    assert levels["blinded"]["symbol"]["hits"] == levels["blinded"]["date"]["hits"] == 0
    assert levels["bright"]["symbol"]["shown"]
    assert not levels["blinded"]["symbol"]["shown"]

    assert table.returncode == 0, table.stderr
    assert "De-anonymisation probe: masked-llm (scripted-1)" in table.stdout
    assert "blinded" in table.stdout
    assert "bright" not in table.stdout
    assert len(model.requests) == 4 * 6 + 6
    assert {headers["authorization"] for headers in model.headers} == {f"Bearer {KEY}"}
    assert not db.exists()
    assert not db.parent.exists()
    assert KEY not in as_json.stdout + as_json.stderr + table.stdout + table.stderr


def test_probe_deanon_needs_an_llm_agent_of_the_market(tmp_path: Path) -> None:
    env = clean_env(OPENBELL_TEST_LLM_KEY=KEY)
    write_config(tmp_path, "http://127.0.0.1:9/v1")
    baseline = openbell(tmp_path, "probe", "deanon", "--agent", "buy-and-hold", "-m", "us", env=env)
    assert baseline.returncode == 2
    assert_one_error_line(baseline, "buy-and-hold", 'kind = "llm"')
    unknown = openbell(tmp_path, "probe", "deanon", "--agent", "nobody", "-m", "us", env=env)
    assert unknown.returncode == 2
    assert_one_error_line(unknown, "nobody", "masked-llm")
    not_enrolled = openbell(
        tmp_path, "probe", "deanon", "--agent", "masked-llm", "-m", "cn", env=env
    )
    assert not_enrolled.returncode == 2
    assert_one_error_line(not_enrolled, "masked-llm")
