"""KTD-Fin's protocol through the real CLI: `openbell replay` of the bundled SSE-50 days with an
LLM agent in `mode = "ktd-fin"` (bright and blinded) against a scripted server on 127.0.0.1. Each
cycle the model calls the six research tools, answers in text, is forced (`tool_choice`) into
`submit_action`, and trades: a lot-size rejection, a fill and a T+1 rejection on the first day,
a sale on the second, a hold on the third. The trace (`openbell trace --json`) shows each tool
call, the submission phase and the benchmark line; the next cycle's prompt shows the previous
step's fills and rejections with their reasons, and the performance line is the account's and
the benchmark's return over the same window, as computed here from the bundled bars."""

from __future__ import annotations

import json
import re
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openbell.agents.ktd.contract import KTD_TOOLS
from openbell.markets.domain import Fill, Rejection, utc
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import load_universe
from openbell.ops.reports.exporting import trace_record
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.traces import cycle_trace
from openbell_testkit.cli import openbell
from openbell_testkit.llm import Body, ScriptedModel, call, completion, serve_script, tool_turn

SESSIONS = 3  # 2025-10-13 .. 2025-10-15
BENCHMARK = "000016.SH"
SUBMIT = {"type": "function", "function": {"name": "submit_action"}}
UNIVERSE_LINE = re.compile(r"## Today's tradable universe \(\d+ names\)\n(.*)\n")


def universe_of(body: Body) -> list[str]:
    """The stock ids of the cycle's first user message, as listed."""
    found = UNIVERSE_LINE.search(body["messages"][1]["content"])
    assert found is not None
    return found.group(1).split(" ")


def results(body: Body) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def ktd_trader(body: Body) -> Body:
    """Research with all six tools, answer in text, then (forced) submit: with nothing held, buy
    the cheapest of ten compared stocks (50 shares: under a lot; then 100) and sell it at once
    (T+1); holding it, sell it all; once sold, hold."""
    ids = universe_of(body)
    if body.get("tool_choice") == SUBMIT:
        account = body["messages"][1]["content"]
        held = re.search(
            r'"stock_id":"([^"]+)","shares":"(\d+)","shares_available":"(\d+)"', account
        )
        sold = re.search(r"^- SELL \S+: filled", account, re.MULTILINE)
        if held is not None and int(held.group(3)) > 0:
            orders = [sell(held.group(1), target_weight=0)]
        elif held is None and sold is None:
            compared = next(r for r in results(body) if "correlations" in r)
            cheapest = min(compared["stocks"], key=lambda s: Decimal(s["last_close"]))["stock_id"]
            orders = [buy(cheapest, 50), buy(cheapest, 100), sell(cheapest, shares=100)]
        else:
            orders = []
        action = {"orders": orders, "overall_reason": "The cheapest of ten, sized to one lot."}
        return completion(None, [call("submit_action", action, "call_submit")])
    if not any(m["role"] == "assistant" for m in body["messages"]):
        return tool_turn(
            ("get_market_context", {}),
            ("screen_candidates", {"sort_by": "ret_20d", "top_k": 5}),
            ("get_stock_snapshot", {"stock_id": ids[0], "lookback": 5}),
            ("compare_candidates", {"stock_ids": ids[:10]}),
            ("get_portfolio_state", {}),
            ("risk_check", {"orders": [{"stock_id": ids[0], "side": "BUY", "shares": 100}]}),
        )
    return completion("Research done.")


def buy(stock_id: str, shares: int) -> dict[str, object]:
    return {
        "stock_id": stock_id,
        "side": "buy",
        "shares": shares,
        "confidence": 0.6,
        "reason": "cheapest of the ten compared",
    }


def sell(
    stock_id: str, *, shares: int | None = None, target_weight: int | None = None
) -> dict[str, object]:
    size = {"shares": shares} if shares is not None else {"target_weight": target_weight}
    return {
        "stock_id": stock_id,
        "side": "sell",
        **size,
        "confidence": 0.5,
        "reason": "exit the whole position",
    }


def config(tmp_path: Path, base_url: str, masking: str) -> str:
    return (
        f'[store]\nurl = "sqlite:///{tmp_path / "ledger.db"}"\n\n'
        '[log]\nformat = "console"\nlevel = "warning"\n\n'
        '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
        'initial_cash = "100000"\n\n'
        '[[agents]]\nname = "ktd"\nkind = "llm"\nmarkets = ["cn"]\n'
        f'base_url = "{base_url}"\nmodel = "scripted-1"\nmode = "ktd-fin"\n'
        f'masking = "{masking}"\nmasking_seed = 7\n'
    )


def percent(value: Decimal) -> str:
    return f"{value * 100:+.2f}%"


def closes_by(symbol: str, at: datetime) -> Decimal:
    """The last daily close of `symbol` ended by `at`, from the bundled bars."""
    source = ReplaySource.from_bundled("cn", names=["cn-1d", "cn-index-1d"])
    bars = source.bars_between([symbol], "1d", utc(2025, 6, 1), at)[symbol]
    return [bar.close for bar in bars if bar.end_at <= at][-1]


@pytest.mark.parametrize("masking", ["bright", "blinded"])
def test_a_ktd_fin_replay_researches_submits_and_trades(tmp_path: Path, masking: str) -> None:
    model = ScriptedModel([ktd_trader] * 100)
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(config(tmp_path, base_url, masking), "utf-8")
        replayed = openbell(tmp_path, "replay", "--start", "2025-10-13", "--end", "2025-10-15")
    assert replayed.returncode == 0, replayed.stderr
    assert f"{SESSIONS} cycles done, 0 failed" in replayed.stdout + replayed.stderr

    # three requests a cycle: research, the text answer, the forced submission
    assert len(model.requests) == 3 * SESSIONS
    for cycle in range(SESSIONS):
        research, answered, forced = model.requests[3 * cycle : 3 * cycle + 3]
        offered = [t["function"]["name"] for t in research["tools"]]
        assert offered == list(KTD_TOOLS)
        assert "tool_choice" not in research
        assert "tool_choice" not in answered
        assert [t["function"]["name"] for t in forced["tools"]] == ["submit_action"]
        assert forced["tool_choice"] == SUBMIT
        assert forced["messages"][-1]["content"].startswith("The research phase is over.")
        served = results(answered)
        assert len(served) == 6
        assert all("code" not in result for result in served), served

    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    ledger = Ledger(engine)
    (account,) = queries.accounts(engine, "cn")
    cycles = [c.cycle_id for c in queries.cycle_activity(engine, account.account_id)]
    assert len(cycles) == SESSIONS
    first, second, third = (ledger.cycle_orders(cycle) for cycle in cycles)
    outcomes = [
        o.outcome.reason.value if isinstance(o.outcome, Rejection) else "filled" for o in first
    ]
    assert outcomes == ["lot_size", "filled", "t_plus_1"]
    bought = first[1].outcome
    assert isinstance(bought, Fill)
    assert [(o.symbol, type(o.outcome)) for o in second] == [(bought.symbol, Fill)]
    assert third == []

    # the trace of each cycle: every tool, the submission phase, the benchmark line
    opened_at = ledger.account_opened_at(account.account_id)
    start = closes_by(BENCHMARK, opened_at)
    for index, cycle in enumerate(cycles):
        if index == 0:  # as `openbell trace` shows it; the others as the ledger holds them
            traced = openbell(tmp_path, "trace", str(cycle), "--json")
            assert traced.returncode == 0, traced.stderr
            record = json.loads(traced.stdout)
        else:
            found = cycle_trace(engine, cycle)
            assert found is not None
            record = trace_record(found)
        entries = record["entries"]
        tools = [e["tool"] for e in entries if e["role"] == "tool"]
        assert tools[:6] == list(KTD_TOOLS)
        assert tools[-1] == "submit_action"
        assert any(
            e["role"] == "user" and e["content"].startswith("The research phase is over.")
            for e in entries
        )
        prompt = next(e["content"] for e in entries if e["role"] == "user")
        slot = datetime.fromisoformat(record["slot_at"])
        expected = percent(closes_by(BENCHMARK, slot) / start - 1)
        line = re.search(r"- Benchmark (\S+) cumulative return over the same window: (\S+)", prompt)
        assert line is not None, prompt
        assert line.group(2) == expected
        assert (line.group(1) == BENCHMARK) == (masking == "bright")
        if index == 0:
            assert "None: this is the first step." in prompt
            assert "Cumulative return since the start of the backtest: +0.00%" in prompt

    prompts = [model.requests[3 * cycle]["messages"][1]["content"] for cycle in range(SESSIONS)]
    previous = prompts[1].split("## Previous-step execution outcome\n")[1].split("\n## ")[0]
    lines = previous.splitlines()
    assert len(lines) == 3, previous
    assert re.fullmatch(r"- BUY \S+ 50: rejected \(lot_size\): .+", lines[0])
    assert re.fullmatch(r"- BUY \S+: filled 100 at [\d.]+, fees [\d.]+", lines[1])
    assert re.fullmatch(r"- SELL \S+ 100: rejected \(t_plus_1\): .+", lines[2])
    assert re.fullmatch(
        r"- SELL \S+: filled 100 at [\d.]+, fees [\d.]+",
        prompts[2].split("## Previous-step execution outcome\n")[1].split("\n")[0],
    )
    # the account's return on the second day: its cash and the lot at the first day's close
    nav = Decimal(100000) - bought.notional - bought.fees
    nav += bought.quantity * closes_by(bought.symbol, utc(2025, 10, 14, 1, 30))
    assert f"backtest: {percent(nav / Decimal(100000) - 1)}" in prompts[1]

    if masking == "blinded":  # nothing real reached the model
        universe = load_universe("sse50")
        sent = json.dumps(model.requests)
        for symbol in (*universe.symbols, BENCHMARK):
            code = symbol.split(".")[0]
            assert not re.search(rf"(?<![\w.]){code}(?![\w])", sent), symbol
        assert not re.search(r"20\d\d-\d\d-\d\d", sent)
