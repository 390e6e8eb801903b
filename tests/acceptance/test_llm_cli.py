"""The real CLI with an LLM agent against a scripted OpenAI-compatible server on 127.0.0.1:
`openbell replay` trades, `openbell report` shows tokens, cost and error counts, `openbell trace`
prints a readable trace of a cycle, and the API key never reaches the ledger or the output; and
`openbell run` (on a fake clock over replayed bars) trades with the same kind of agent entry."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
from pathlib import Path
from typing import Any

from openbell_testkit.cli import CRYPTO_1H, clean_env, cycle_rows, openbell
from openbell_testkit.llm import (
    Body,
    ScriptedModel,
    finish,
    self_correcting_trader,
    serve_script,
    tool_turn,
)
from tests.acceptance.test_run import Daemon, assert_ledger_verifies

KEY = "sk-cli-acceptance-0123456789"


def test_replay_report_and_trace_of_an_llm_agent(tmp_path: Path) -> None:
    model = ScriptedModel([self_correcting_trader] * 100)
    db = tmp_path / "var" / "ledger.db"
    env = clean_env(OPENBELL_TEST_LLM_KEY=KEY)
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{db}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
            '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
            # September 2025 is before the dates sse50.toml vouches for (2025-09-30 on), and
            # 688981.SH has no bundled bars that week
            'initial_cash = "100000"\nallow_outside_coverage = true\n'
            "allow_partial_coverage = true\n\n"
            '[[agents]]\nname = "local-llm"\nkind = "llm"\nmarkets = ["cn"]\n'
            f'base_url = "{base_url}"\nmodel = "scripted-1"\n'
            'api_key_env = "OPENBELL_TEST_LLM_KEY"\n'
            'price_in_per_mtok = "0.27"\nprice_out_per_mtok = "1.10"\n',
            encoding="utf-8",
        )
        replayed = openbell(
            tmp_path, "replay", "--start", "2025-09-01", "--end", "2025-09-03", env=env
        )
    assert replayed.returncode == 0, replayed.stderr
    assert "3 cycles done, 0 failed" in replayed.stdout + replayed.stderr

    reported = openbell(tmp_path, "report", "local-llm", "--market", "cn", "--json", env=env)
    assert reported.returncode == 0, reported.stderr
    record = json.loads(reported.stdout)
    assert record["llm_decisions"] == 3
    assert record["tokens_in"] == 300 * 2 + 100 + 100  # 4 turns, then 2 and 2 (see the script)
    assert float(record["cost"]) > 0
    assert float(record["cost_per_decision"]) == float(record["cost"]) / 3
    assert (record["parse_failures"], record["invalid_tool_calls"]) == (0, 0)
    assert record["rejections_by_reason"] == {"lot_size": 1}
    table = openbell(tmp_path, "report", "local-llm", "--market", "cn", env=env)
    assert table.returncode == 0, table.stderr
    for words in ("tokens_in", "cost_per_decision", "lot_size: 1", "invalid_tool_calls"):
        assert words in table.stdout

    traced = openbell(tmp_path, "trace", "1", env=env)
    assert traced.returncode == 0, traced.stderr
    out = traced.stdout
    for words in ("cycle 1: local-llm (llm) in cn", "tokens in 400", "get_bars", "place_order",
                  "lot_size", "finish", "assistant", "100/20"):  # fmt: skip
        assert words in out, out
    as_json = json.loads(openbell(tmp_path, "trace", "1", "--json", env=env).stdout)
    assert [e["role"] for e in as_json["entries"]][:3] == ["system", "user", "assistant"]

    missing = openbell(tmp_path, "trace", "999", env=env)
    assert missing.returncode != 0
    assert "no cycle 999" in missing.stderr
    assert "Traceback" not in missing.stderr

    with sqlite3.connect(db) as connection:
        dump = "\n".join(line for line in connection.iterdump())
    assert KEY not in dump
    assert KEY not in replayed.stdout + replayed.stderr + out


def alias_trader(body: Body) -> Body:
    """A blinded model: bars and a quote of the first stock it is shown, 100 shares of it."""
    first = re.findall(r"asset_\d{4}", body["messages"][1]["content"])[0]
    done = sum(1 for m in body["messages"] if m["role"] == "tool")
    if done == 0:
        return tool_turn(
            ("get_bars", {"symbol": first, "lookback": 3}), ("get_quote", {"symbols": [first]})
        )
    if done == 2:
        return tool_turn(("place_order", {"symbol": first, "side": "buy", "shares": 100}))
    return finish(f"Bought {first}.")


def test_trace_unmasks_a_blinded_cycle_with_the_stored_key(tmp_path: Path) -> None:
    model = ScriptedModel([alias_trader] * 10)
    db = tmp_path / "var" / "ledger.db"
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{db}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
            '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
            'initial_cash = "1000000"\n\n'
            '[[agents]]\nname = "blind"\nkind = "llm"\nmarkets = ["cn"]\n'
            f'base_url = "{base_url}"\nmodel = "scripted-1"\nmasking = "blinded"\n',
            encoding="utf-8",
        )
        replayed = openbell(tmp_path, "replay", "--start", "2025-10-09", "--end", "2025-10-09")
    assert replayed.returncode == 0, replayed.stderr
    masked = openbell(tmp_path, "trace", "1", "--json")
    assert masked.returncode == 0, masked.stderr
    texts = ("content", "arguments", "result")  # what the model was shown and wrote
    shown = json.dumps([[e[k] for k in texts] for e in json.loads(masked.stdout)["entries"]])
    assert "asset_" in shown
    assert "day_" in shown
    assert "2025-10-09" not in shown
    with sqlite3.connect(db) as connection:
        (symbol,) = connection.execute("SELECT symbol FROM fill").fetchone()
        (unit,) = connection.execute("SELECT money_unit FROM masking_key").fetchone()

    unmasked = openbell(tmp_path, "trace", "1", "--json", "--unmask")
    assert unmasked.returncode == 0, unmasked.stderr
    record = json.loads(unmasked.stdout)
    real = json.dumps([[e[k] for k in texts] for e in record["entries"]])
    assert "asset_" not in real
    assert "day_+" not in real
    assert symbol in real
    assert "2025-10-09" in real
    assert record["money_unit"] == unit
    table = openbell(tmp_path, "trace", "1", "--unmask")
    assert table.returncode == 0, table.stderr
    assert f"prices and money were shown divided by {unit}" in " ".join(table.stdout.split())

    bright = openbell(tmp_path, "trace", "999", "--unmask")
    assert bright.returncode != 0
    assert "no cycle 999" in bright.stderr


def bitcoin_buyer(body: Body) -> Body:
    """Each cycle: quote BTC/USDT, buy 0.01 of it, finish."""
    results: list[dict[str, Any]] = [
        json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"
    ]
    if not results:
        return tool_turn(("get_quote", {"symbols": ["BTC/USDT"]}))
    if "quotes" in results[-1]:
        order = {"symbol": "BTC/USDT", "side": "buy", "shares": "0.01", "reason": "trend"}
        return tool_turn(("place_order", order))
    return finish(f"Order {results[-1].get('status')}.")


def test_run_trades_with_an_llm_agent(tmp_path: Path) -> None:
    model = ScriptedModel([bitcoin_buyer] * 100)
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            '[store]\nurl = "sqlite:///var/openbell.db"\n\n[http]\nlisten = "127.0.0.1:0"\n\n'
            '[markets.crypto]\nuniverse = "crypto10"\ncadence = "hourly"\n'
            f'source = "replay:{CRYPTO_1H}"\ninitial_cash = "10000"\n\n'
            '[[agents]]\nname = "local-llm"\nkind = "llm"\nmarkets = ["crypto"]\n'
            f'base_url = "{base_url}"\nmodel = "scripted-1"\n',
            encoding="utf-8",
        )
        with Daemon(tmp_path, "--fake-clock", "2025-11-03T00:59:00Z:600") as daemon:
            daemon.wait_for("slot_finished")
            daemon.wait_for("slot_finished")
            code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    done = [row for row in cycle_rows(tmp_path) if row.status == "done"]
    assert len(done) >= 2
    assert all(row.tokens_in for row in done)  # every cycle talked to the model
    assert len(model.requests) >= 3 * len(done)
    reported = openbell(tmp_path, "report", "local-llm", "--market", "crypto", "--json")
    assert reported.returncode == 0, reported.stderr
    record = json.loads(reported.stdout)
    assert record["llm_decisions"] >= 2
    assert record["trades"] >= 2
    traced = openbell(tmp_path, "trace", str(done[0].id))
    assert traced.returncode == 0, traced.stderr
    for words in ("local-llm (llm) in crypto", "get_quote", "place_order", "BTC/USDT", "finish"):
        assert words in traced.stdout, traced.stdout
    assert_ledger_verifies(tmp_path)
