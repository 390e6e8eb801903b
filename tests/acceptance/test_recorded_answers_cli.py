"""Recorded model answers through the real CLI: a replay of one LLM agent per decision mode (two of
them masked, one blinded with its money rebased) against scripted servers on 127.0.0.1 records
every exchange; with the servers stopped, `openbell replay --answers` re-runs it into a fresh
ledger that equals the original row by row (cycles, orders, fills, NAV snapshots and every trace
row's text, request digest and response; only ids and wall-clock times differ), and a request the
record does not hold fails its cycle instead of reaching a network. `--swap-model` re-decides one
agent with a second scripted model: only that agent's decisions change, and the command says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from sqlalchemy import MetaData, Table, func, select

from openbell.store.db import make_engine
from openbell_testkit.cli import clean_env, openbell
from openbell_testkit.compare import TABLES, Row, ledger_rows
from openbell_testkit.llm import (
    Body,
    ScriptedModel,
    call,
    completion,
    finish,
    serve_script,
    tool_turn,
)

START, END = "2025-10-01", "2025-10-07"  # five sessions of the bundled US bars
SESSIONS = 5
ALIAS = re.compile(r"asset_\d{4}")


def first_user(body: Body) -> str:
    content: str = body["messages"][1]["content"]
    return content


def has_results(body: Body) -> bool:
    return any(message["role"] == "tool" for message in body["messages"])


def researcher(body: Body) -> Body:
    """Open research, bright: buys one AAPL a day (two on the first), then finishes."""
    if has_results(body):
        return finish("Bought.")
    shares = 2 if "positions none" in first_user(body) else 1
    return tool_turn(
        ("get_quote", {"symbols": ["AAPL"]}),
        ("place_order", {"symbol": "AAPL", "side": "buy", "shares": shares}),
    )


def masked_researcher(body: Body) -> Body:
    """Open research, masked: buys one share of the first alias it is shown, then finishes."""
    if has_results(body):
        return finish("Bought.")
    alias = ALIAS.findall(first_user(body))[0]
    return tool_turn(("place_order", {"symbol": alias, "side": "buy", "shares": 1}))


def order(stock_id: str, shares: int, side: str = "buy") -> dict[str, object]:
    return {
        "stock_id": stock_id,
        "side": side,
        "shares": shares,
        "confidence": 0.6,
        "reason": "the scripted choice",
    }


def candidates(body: Body) -> list[str]:
    """The ids of the fixed-candidate table, best first."""
    return re.findall(r"^([A-Z]+) \| ", first_user(body), re.MULTILINE)


def candidate_picker(body: Body) -> Body:
    """Fixed-candidate: one share of the best candidate a day."""
    return completion(json.dumps({"orders": [order(candidates(body)[0], 1)]}))


def memory_picker(body: Body) -> Body:
    """Memory-only, stock-blind: one share of the second alias shown."""
    alias = ALIAS.findall(first_user(body))[1]
    return completion(json.dumps({"orders": [order(alias, 1)], "overall_reason": "r"}))


def stockbench(body: Body) -> Body:
    """StockBench: selects AAPL and NVDA, then raises AAPL to 10% of NAV."""
    last = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
    if "Stage 1 of 4" in last:
        return completion(json.dumps({"selected": ["AAPL", "NVDA"]}))
    decision = {
        "stock_id": "AAPL",
        "action": "increase",
        "target_weight": 0.1,
        "confidence": 0.7,
        "reason": "r",
    }
    return completion(json.dumps({"decisions": [decision]}))


SUBMIT = {"type": "function", "function": {"name": "submit_action"}}
KTD_UNIVERSE = re.compile(r"## Today's tradable universe \(\d+ names\)\n(.*)\n")


def ktd_trader(body: Body) -> Body:
    """KTD-Fin, blinded: one research call, a text answer, then (forced) buys one share of the
    first id of the day's universe."""
    if body.get("tool_choice") == SUBMIT:
        found = KTD_UNIVERSE.search(first_user(body))
        assert found is not None
        action = {"orders": [order(found.group(1).split(" ")[0], 1)], "overall_reason": "r"}
        return completion(None, [call("submit_action", action, "call_submit")])
    if not any(m["role"] == "assistant" for m in body["messages"]):
        return tool_turn(("get_portfolio_state", {}))
    return completion("Research done.")


HEDGE_DAYS = {"2025-10-01": "long-short", "2025-10-03": "close", "2025-10-06": "long-short"}


def hedger(body: Body) -> Body:
    """Hedge: long AAPL, short MSFT on the 1st, closed on the 3rd, opened again on the 6th."""
    day = re.search(r"Now: (\d{4}-\d{2}-\d{2})", first_user(body))
    assert day is not None
    action = HEDGE_DAYS.get(day.group(1), "hold")
    answer: dict[str, object] = {"action": action}
    if action == "long-short":
        answer |= {"pair": ["AAPL", "MSFT"], "reason": "spread"}
    return completion(json.dumps(answer))


def pair_trader(body: Body) -> Body:
    """Pair: long AAPL against a short MSFT, then finish."""
    if has_results(body):
        return finish("Hedged.")
    return tool_turn(
        ("place_order", {"symbol": "MSFT", "side": "short", "target_weight": 0.1}),
        ("place_order", {"symbol": "AAPL", "side": "buy", "target_weight": 0.1}),
    )


#: name -> (the entry's mode lines, its scripted model)
AGENTS: dict[str, tuple[str, Callable[[Body], Body]]] = {
    "researcher": ('mode = "open-research"\napi_key_env = "SCRIPTED_KEY"\n', researcher),
    "masked": ('mode = "open-research"\nmasking = "stock-blind"\n', masked_researcher),
    "candidates": ('mode = "fixed-candidate"\n', candidate_picker),
    "memory": ('mode = "memory-only"\nmasking = "stock-blind"\n', memory_picker),
    "bench": ('mode = "stockbench"\n', stockbench),
    "ktd": ('mode = "ktd-fin"\nmasking = "blinded"\n', ktd_trader),
    "hedger": ('mode = "hedge"\nallow_short = true\n', hedger),
    "pairs": ('mode = "pair"\nallow_short = true\npairs = [["AAPL", "MSFT"]]\n', pair_trader),
}


def write_config(tmp_path: Path, urls: dict[str, str]) -> None:
    entries = "".join(
        f'[[agents]]\nname = "{name}"\nkind = "llm"\nmarkets = ["us"]\n{lines}'
        f'base_url = "{urls[name]}"\nmodel = "scripted-1"\n\n'
        for name, (lines, _) in AGENTS.items()
    )
    (tmp_path / "openbell.toml").write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "original.db"}"\n\n'
        '[log]\nformat = "console"\nlevel = "warning"\n\n'
        '[markets.us]\nuniverse = "nasdaq100"\ncadence = "daily"\nsource = "yfinance"\n'
        'initial_cash = "10000"\n\n'
        '[[agents]]\nname = "holder"\nkind = "buy_and_hold"\nmarkets = ["us"]\n\n' + entries,
        encoding="utf-8",
    )


def first_llm_cycle(db: Path) -> str:
    """The id of the first cycle with a model exchange."""
    engine = make_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as connection:
            trace = Table("trace", MetaData(), autoload_with=engine)
            found = connection.execute(
                select(func.min(trace.c.cycle_id)).where(trace.c.role == "assistant")
            ).scalar_one()
    finally:
        engine.dispose()
    return str(found)


def agent_rows(rows: dict[str, list[Row]], agent: str) -> list[tuple[str, dict[str, str]]]:
    """The agent's orders, fills and NAV snapshots."""
    return [
        (table, dict(values))
        for table in ("order", "fill", "nav_snapshot")
        for name, values in rows[table]
        if name == agent
    ]


def test_answers_rerun_equals_the_original_and_a_swap_changes_only_its_agent(
    tmp_path: Path,
) -> None:
    env = clean_env(without=["SCRIPTED_KEY"])  # the re-runs need no key
    models = {name: ScriptedModel([answer] * 200) for name, (_, answer) in AGENTS.items()}
    with ExitStack() as servers:
        urls = {name: servers.enter_context(serve_script(model)) for name, model in models.items()}
        write_config(tmp_path, urls)
        keyed = {**env, "SCRIPTED_KEY": "sk-0a1b2c3d4e5f6a7b8c9d"}
        recorded = openbell(tmp_path, "replay", "--start", START, "--end", END, env=keyed)
    assert recorded.returncode == 0, recorded.stderr
    total = SESSIONS * (len(AGENTS) + 1)
    assert f"{total} cycles done, 0 failed" in recorded.stdout + recorded.stderr
    asked = sum(len(model.requests) for model in models.values())
    assert models["researcher"].headers[0]["authorization"] == "Bearer sk-0a1b2c3d4e5f6a7b8c9d"

    # The servers are stopped: the re-run asks nothing of any network.
    rerun = openbell(
        tmp_path,
        "replay", "--start", START, "--end", END,
        "--answers", str(tmp_path / "original.db"), "--db", str(tmp_path / "rerun.db"),
        env=env,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert f"{total} cycles done, 0 failed" in rerun.stdout + rerun.stderr
    assert f"answering from {asked} recorded exchanges" in rerun.stderr
    original = ledger_rows(tmp_path / "original.db")
    again = ledger_rows(tmp_path / "rerun.db")
    for table in TABLES:
        assert again[table] == original[table], table
    for agent in AGENTS:  # every mode traded, so the equality covers its decisions
        assert any(table == "fill" for table, _ in agent_rows(original, agent)), agent
    exchanges = [dict(values) for _, values in original["trace"]]
    exchanges = [row for row in exchanges if row["role"] == "'assistant'"]
    assert len(exchanges) == asked
    assert all(row["request_digest"].startswith("'sha256:") for row in exchanges)
    cycle = first_llm_cycle(tmp_path / "original.db")
    traced = openbell(tmp_path, "trace", cycle, "--json", "--db", str(tmp_path / "original.db"))
    assert traced.returncode == 0, traced.stderr
    shown = [
        e["request_digest"]
        for e in json.loads(traced.stdout)["entries"]
        if e["role"] == "assistant"
    ]
    assert shown
    assert all(digest.startswith("sha256:") for digest in shown)

    # A second model for `candidates` buys the last candidate; the others replay their answers.
    def other_model(body: Body) -> Body:
        assert body["model"] == "scripted-2"
        return completion(json.dumps({"orders": [order(candidates(body)[-1], 1)]}))

    # And a model for the masked `memory` that answers as its recorded one: asked on the recorded
    # masking key, it picks the same stocks, so its account does not change either.
    second = ScriptedModel([other_model] * 100)
    third = ScriptedModel([memory_picker] * 100)
    with serve_script(second) as second_url, serve_script(third) as third_url:
        swapped = openbell(
            tmp_path,
            "replay", "--start", START, "--end", END,
            "--answers", str(tmp_path / "original.db"), "--db", str(tmp_path / "swapped.db"),
            "--swap-model", f"candidates=scripted-2@{second_url}",
            "--swap-model", f"memory=scripted-3@{third_url}",
            env=env,
        )  # fmt: skip
    assert swapped.returncode == 0, swapped.stderr
    assert "swapped: agent candidates swapped to model scripted-2" in swapped.stdout
    assert "swapped: agent memory swapped to model scripted-3" in swapped.stdout
    assert len(second.requests) == len(third.requests) == SESSIONS
    assert [body["model"] for body in third.requests] == ["scripted-3"] * SESSIONS
    changed = ledger_rows(tmp_path / "swapped.db")
    for agent in ("holder", *AGENTS):
        same = agent_rows(changed, agent) == agent_rows(original, agent)
        assert same == (agent != "candidates"), agent
    bought = [row["symbol"] for table, row in agent_rows(changed, "candidates") if table == "order"]
    first = [row["symbol"] for table, row in agent_rows(original, "candidates") if table == "order"]
    assert len(bought) == len(first) == SESSIONS
    assert set(bought).isdisjoint(first)

    # The board shows both ledgers side by side: only the swapped agent's result changed.
    board = openbell(
        tmp_path,
        "leaderboard", "--db", str(tmp_path / "original.db"),
        "--beside", str(tmp_path / "swapped.db"), "--format", "json",
        env=env,
    )  # fmt: skip
    assert board.returncode == 0, board.stderr
    (market,) = json.loads(board.stdout)
    marks = {row["name"]: row["changed"] for row in market["rows"]}
    assert marks == {name: name == "candidates" for name in marks}
    assert set(AGENTS) | {"holder"} < set(marks)  # and the benchmark
    table = openbell(
        tmp_path,
        "leaderboard", "--db", str(tmp_path / "original.db"),
        "--beside", str(tmp_path / "swapped.db"),
        env=env,
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    marked = [line.split()[0] for line in table.stdout.splitlines() if line.endswith(" yes")]
    assert marked == ["candidates"]

    # A record that lacks an agent's answers: its cycles fail, none reaches a network.
    lacking = openbell(
        tmp_path,
        "replay", "--start", START, "--end", END,
        "--answers", str(tmp_path / "swapped.db"), "--db", str(tmp_path / "drift.db"),
        env=env,
    )  # fmt: skip
    # (the swapped agents' exchanges were recorded as asked of scripted-2 and -3)
    assert lacking.returncode == 3, lacking.stderr  # EX_AGENT_FAILED: their cycles all failed
    failed = 2 * SESSIONS
    assert f"{total - failed} cycles done, {failed} failed" in lacking.stdout + lacking.stderr
    assert "no recorded answer" in lacking.stdout + lacking.stderr
