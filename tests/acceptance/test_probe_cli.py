"""`openbell probe deanon`, the real CLI against models served on 127.0.0.1: every level by
default, one with --level, JSON and table output, the agent's key sent, several attackers by
name, and nothing written (no ledger); a wrong agent or attacker is one error line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openbell_testkit.cli import assert_one_error_line, clean_env, openbell
from openbell_testkit.llm import Body, ScriptedModel, completion, serve_script

KEY = "sk-probe-acceptance-0123456789"


def reader(body: Body) -> Body:
    """A model that names what it is shown: the series' symbol and its last bar's date text."""
    text = body["messages"][-1]["content"]
    shown, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
    last = shown["bars"][-1]["start_at"]
    return completion(json.dumps({"symbol": shown["symbol"], "date": last[:10]}))


def write_config(tmp_path: Path, base_url: str, judge_url: str = "http://127.0.0.1:9/v1") -> Path:
    (tmp_path / "openbell.toml").write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "var" / "ledger.db"}"\n\n'
        '[log]\nformat = "console"\nlevel = "warning"\n\n'
        '[markets.us]\nuniverse = "nasdaq100"\ncadence = "hourly"\nsource = "yfinance"\n'
        'initial_cash = "10000"\n\n'
        '[[agents]]\nname = "buy-and-hold"\nkind = "buy_and_hold"\nmarkets = ["us"]\n\n'
        '[[agents]]\nname = "masked-llm"\nkind = "llm"\nmarkets = ["us"]\n'
        f'base_url = "{base_url}"\nmodel = "scripted-1"\napi_key_env = "OPENBELL_TEST_LLM_KEY"\n'
        'masking = "stock-blind"\nmasking_seed = 3\n\n'
        f'[judges.second-opinion]\nbase_url = "{judge_url}"\nmodel = "scripted-2"\n',
        encoding="utf-8",
    )
    return tmp_path / "var" / "ledger.db"


def levels_of(record: dict[str, Any], attacker: int = 0) -> dict[str, Any]:
    return {level["level"]: level for level in record["attackers"][attacker]["levels"]}


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
    assert (record["agent"], record["interval"], record["payload"]) == ("masked-llm", "1h", "bars")
    ((attacker, named),) = [(a["attacker"], a["model"]) for a in record["attackers"]]
    assert (attacker, named) == ("masked-llm", "scripted-1")
    assert record["tolerance_trading_days"] == 7
    assert (record["trials"], record["symbols"]) == (6, 101)
    levels = levels_of(record)
    assert list(levels) == ["bright", "stock-blind", "date-blind", "blinded"]
    # The reader names what is real on its screen, and nothing else.
    assert levels["bright"]["ticker_top1"]["hits"] == levels["bright"]["date"]["hits"] == 6
    assert levels["bright"]["joint"]["hits"] == 6
    assert levels["bright"]["joint"]["wilson_95"][0] == pytest.approx(6 / (6 + 1.96**2), abs=1e-3)
    assert levels["stock-blind"]["ticker_top1"]["hits"] == 0
    assert levels["stock-blind"]["date"]["hits"] == 6
    assert levels["date-blind"]["ticker_top1"]["hits"] == 6
    assert levels["date-blind"]["date"]["hits"] == 0
    assert levels["blinded"]["rebased"] is True
    assert levels["blinded"]["ticker_top1"]["hits"] == levels["blinded"]["date"]["hits"] == 0
    assert levels["bright"]["ticker_top1"]["shown"]
    assert not levels["blinded"]["ticker_top1"]["shown"]
    assert set(levels["bright"]["skipped"]) == {"sector", "board"}

    assert table.returncode == 0, table.stderr
    assert "De-anonymisation probe: masked-llm (scripted-1)" in table.stdout
    assert "Wilson 95% intervals" in table.stdout
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


def test_probe_deanon_asks_several_attackers_the_same_questions(tmp_path: Path) -> None:
    first = ScriptedModel([reader] * 20)
    second = ScriptedModel([lambda body: completion("I cannot tell.")] * 20)
    env = clean_env(OPENBELL_TEST_LLM_KEY=KEY)
    args = ("probe", "deanon", "-m", "us", "--attacker", "masked-llm", "--attacker",
            "second-opinion", "--trials", "5", "--lookback", "3", "--level", "bright",
            "--format", "json")  # fmt: skip
    with serve_script(first) as base_url, serve_script(second) as judge_url:
        write_config(tmp_path, base_url, judge_url)
        result = openbell(tmp_path, *args, env=env)
        unknown = openbell(tmp_path, "probe", "deanon", "-m", "us", "-A", "nobody", env=env)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert "agent" not in record
    names = [(a["attacker"], a["model"]) for a in record["attackers"]]
    assert names == [("masked-llm", "scripted-1"), ("second-opinion", "scripted-2")]
    assert levels_of(record, 0)["bright"]["ticker_top1"]["hits"] == 5
    silent = levels_of(record, 1)["bright"]
    assert (silent["unanswered"], silent["answered"]) == (5, 0)
    assert silent["ticker_top1"]["wilson_95"] == [0.0, 1.0]
    asked = [
        sorted(body["messages"][-1]["content"] for body in m.requests) for m in (first, second)
    ]
    assert asked[0] == asked[1]
    assert len(asked[0]) == 5
    assert "authorization" not in second.headers[0]  # the judge names no key
    assert unknown.returncode == 2
    assert_one_error_line(unknown, "nobody", "masked-llm", "second-opinion")


def test_probe_deanon_shows_quotes_and_scores_sectors_and_boards(tmp_path: Path) -> None:
    gold = {"600519.SH": "Consumer Staples", "688981.SH": "Semiconductors"}

    def quote_reader(body: Body) -> Body:
        """Reads the board off the quote; names a sector from the gold file when it knows it."""
        text = body["messages"][-1]["content"]
        shown, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
        (quote,) = shown["quotes"]
        sector = gold.get(quote["symbol"], "Banks")
        return completion(json.dumps({"tickers": [quote["symbol"]], "board": quote["board"],
                                      "sector": sector}))  # fmt: skip

    model = ScriptedModel([quote_reader] * 20)
    (tmp_path / "sectors.toml").write_text(
        "".join(f'"{symbol}" = "{sector}"\n' for symbol, sector in gold.items()), encoding="utf-8"
    )
    (tmp_path / "bad.toml").write_text('"600519.SH" = 3\n', encoding="utf-8")
    env = clean_env(OPENBELL_TEST_LLM_KEY=KEY)
    with serve_script(model) as base_url:
        write_config(tmp_path, base_url)
        config = (tmp_path / "openbell.toml").read_text(encoding="utf-8")
        config += (
            '\n[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
            'initial_cash = "1000000"\n'
        )
        (tmp_path / "openbell.toml").write_text(config, encoding="utf-8")
        args = ("probe", "deanon", "-m", "cn", "-A", "masked-llm", "--payload", "quotes",
                "--level", "bright", "--trials", "20", "--lookback", "3")  # fmt: skip
        result = openbell(tmp_path, *args, "--sectors", "sectors.toml", "--format", "json", env=env)
        bad = openbell(tmp_path, *args, "--sectors", "bad.toml", env=env)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["payload"] == "quotes"
    bright = levels_of(record)["bright"]
    assert bright["ticker_top1"]["hits"] == bright["board"]["hits"] == 20
    assert bright["board"]["shown"]
    assert bright["date"]["hits"] == 0  # the reader names no date
    # Only the trials of the two symbols the file names (drawn with seed 0) are scored for the
    # sector, all hits; the attacker is an agent of another market: any configured model is.
    sector = bright["sector"]
    assert 0 < sector["trials"] < 20
    assert sector["hits"] == sector["trials"]
    assert sector["chance"] == 0.5
    assert bright["skipped"] == {}
    assert bad.returncode == 2
    assert_one_error_line(bad, "bad.toml", "non-empty string")
