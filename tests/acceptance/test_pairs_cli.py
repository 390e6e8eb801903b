"""The real CLI with long-short agents (issue 16): `openbell replay` over the bundled crypto bars
with the pair-neutral baseline and an LLM agent in pair mode (a scripted model on 127.0.0.1) trades
shorts, charges borrow fees, closes the leg a pair was left with, and the ledger verifies; the
leaderboard (JSON, CSV, table) and `openbell report` show the long-short metrics for those agents
only; and `openbell run` on a fake clock over the bundled bars trades shorts the same way."""

from __future__ import annotations

import csv
import io
import json
import re
import signal
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import text

from openbell.ops.reports.exporting import LEADERBOARD_KEYS, LONG_SHORT_KEYS
from openbell.store.db import make_engine
from openbell_testkit.cli import clean_env, cycle_rows, openbell
from openbell_testkit.llm import ScriptedModel, finish, serve_script, tool_turn
from tests.acceptance.test_run import Daemon, assert_ledger_verifies

PAIRS = '[["BTC/USDT", "ETH/USDT"], ["SOL/USDT", "XRP/USDT"]]'


def hedger(body: dict[str, Any]) -> dict[str, Any]:
    """Each cycle: long BTC and short ETH (a hedged pair), and buy SOL alone (a one-legged pair,
    which the pair rule closes after the turn); then finish."""
    if any(message["role"] == "tool" for message in body["messages"]):
        return finish("Hedged BTC/ETH; SOL alone.")
    return tool_turn(
        ("place_order", {"symbol": "ETH/USDT", "side": "short", "target_weight": 0.2}),
        ("place_order", {"symbol": "BTC/USDT", "side": "buy", "target_weight": 0.2}),
        ("place_order", {"symbol": "SOL/USDT", "side": "buy", "target_weight": 0.1}),
    )


def agents(base_url: str) -> str:
    return (
        '[[agents]]\nname = "pair-neutral"\nkind = "pair_neutral"\nmarkets = ["crypto"]\n'
        f"allow_short = true\npairs = {PAIRS}\n\n"
        '[[agents]]\nname = "hedger"\nkind = "llm"\nmode = "pair"\nmarkets = ["crypto"]\n'
        f'allow_short = true\npairs = {PAIRS}\nbase_url = "{base_url}"\nmodel = "scripted-1"\n\n'
        '[[agents]]\nname = "equal-weight"\nkind = "equal_weight"\nmarkets = ["crypto"]\n'
    )


def orders(tmp_path: Path) -> list[Any]:
    engine = make_engine(f"sqlite:///{tmp_path / 'var' / 'openbell.db'}")
    try:
        with engine.connect() as connection:
            return list(
                connection.execute(
                    text(
                        "SELECT agent.name AS agent, o.symbol, o.side, o.status, o.reason "
                        'FROM "order" o '
                        "JOIN account ON account.id = o.account_id "
                        "JOIN agent ON agent.id = account.agent_id ORDER BY o.id"
                    )
                )
            )
    finally:
        engine.dispose()


def borrow_fees(tmp_path: Path) -> dict[str, Decimal]:
    engine = make_engine(f"sqlite:///{tmp_path / 'var' / 'openbell.db'}")
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT agent.name, f.amount FROM borrow_fee f "
                    "JOIN account ON account.id = f.account_id "
                    "JOIN agent ON agent.id = account.agent_id"
                )
            )
            found: dict[str, Decimal] = {}
            for name, amount in rows:
                found[name] = found.get(name, Decimal(0)) + Decimal(str(amount))
            return found
    finally:
        engine.dispose()


def assert_shorts_traded(tmp_path: Path) -> None:
    placed = orders(tmp_path)
    for agent in ("pair-neutral", "hedger"):
        sides = {row.side for row in placed if row.agent == agent and row.status == "filled"}
        assert {"short", "buy"} <= sides, (agent, sides)
    assert not any(row.side in ("short", "cover") for row in placed if row.agent == "equal-weight")
    closed = [row for row in placed if row.agent == "hedger" and row.reason.startswith("pair rule")]
    assert closed
    assert {(row.symbol, row.side) for row in closed} == {("SOL/USDT", "sell")}


def test_replay_of_long_short_agents_verifies_and_is_ranked(tmp_path: Path) -> None:
    model = ScriptedModel([hedger] * 40)
    db = tmp_path / "var" / "openbell.db"
    env = clean_env()
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{db}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
            '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\n'
            'source = "ccxt:binance"\ninitial_cash = "10000"\n\n' + agents(base_url),
            encoding="utf-8",
        )
        replayed = openbell(
            tmp_path, "replay", "--start", "2025-11-01", "--end", "2025-11-20", env=env
        )
    assert replayed.returncode == 0, replayed.stderr
    assert "60 cycles done, 0 failed" in replayed.stdout + replayed.stderr
    shown = json.dumps(model.requests[0])
    assert '"short", "cover"' in shown  # the pair agent is offered short and cover
    assert "Pair mode: you trade the pairs BTC/USDT vs ETH/USDT; SOL/USDT vs XRP/USDT" in shown
    assert "Long and short" in shown
    assert "gross exposure 0.0000, net 0.0000, margin requirement 0," in shown, [
        m["content"] for m in model.requests[0]["messages"]
    ]
    assert_shorts_traded(tmp_path)
    fees = borrow_fees(tmp_path)
    assert fees["pair-neutral"] > 0
    assert fees["hedger"] > 0
    # The hedger's last cycle is told the fees charged before it (never the last day's own).
    last = model.requests[-2]["messages"][1]["content"]
    (paid,) = re.findall(r"borrow fees paid ([0-9.]+)", last)
    assert 0 < Decimal(paid) <= fees["hedger"]
    assert "equal-weight" not in fees
    assert_ledger_verifies(tmp_path)
    traced = openbell(tmp_path, "trace", "2", env=env)  # the hedger's first cycle
    assert traced.returncode == 0, traced.stderr
    assert "pair rule: closed SOL/USDT (filled)" in traced.stdout

    board = openbell(tmp_path, "leaderboard", "--market", "crypto", "--format", "json", env=env)
    assert board.returncode == 0, board.stderr
    rows = {row["name"]: row for row in json.loads(board.stdout)["leaderboards"][0]["rows"]}
    assert {"pair-neutral", "hedger", "equal-weight"} <= set(rows)
    # The hedger's model (scripted-1) has no training-cutoff entry: its row is marked.
    marked = {"pair-neutral": (), "hedger": ("cutoff_status", "inside_cutoff_slots")}
    for name in ("pair-neutral", "hedger"):
        assert tuple(rows[name]) == (*LEADERBOARD_KEYS, *LONG_SHORT_KEYS, *marked[name])
        assert rows[name]["rank"] is not None
        assert rows[name]["borrow_cost"] > 0
    # pair-neutral: equal notional legs, a quarter of NAV each, gross about 1, net about 0.
    assert 0.8 < rows["pair-neutral"]["mean_gross_exposure"] < 1.1
    assert abs(rows["pair-neutral"]["mean_net_exposure"]) < 0.2
    assert tuple(rows["equal-weight"]) == LEADERBOARD_KEYS

    table = openbell(tmp_path, "leaderboard", "--market", "crypto", env=env)
    assert table.returncode == 0, table.stderr
    assert "gross %" in table.stdout
    assert "borrow %" in table.stdout
    as_csv = openbell(tmp_path, "leaderboard", "--market", "crypto", "-f", "csv", env=env)
    header = next(csv.reader(io.StringIO(as_csv.stdout)))
    assert header[-3:] == list(LONG_SHORT_KEYS)

    reported = openbell(tmp_path, "report", "pair-neutral", "--market", "crypto", "--json", env=env)
    assert reported.returncode == 0, reported.stderr
    record = json.loads(reported.stdout)
    assert Decimal(record["borrow_fees"]) == fees["pair-neutral"]
    assert record["borrow_cost"] == float(fees["pair-neutral"] / Decimal(10000))
    assert record["mean_gross_exposure"] > 0.8
    plain = openbell(tmp_path, "report", "equal-weight", "--market", "crypto", "--json", env=env)
    assert "mean_gross_exposure" not in json.loads(plain.stdout)


def test_run_on_a_fake_clock_trades_shorts(tmp_path: Path) -> None:
    model = ScriptedModel([hedger] * 40)
    with serve_script(model) as base_url:
        (tmp_path / "openbell.toml").write_text(
            '[store]\nurl = "sqlite:///var/openbell.db"\n\n[http]\nlisten = "127.0.0.1:0"\n\n'
            '[markets.crypto]\nuniverse = "crypto10"\ncadence = "hourly"\n'
            'source = "bundled"\ninitial_cash = "10000"\n\n' + agents(base_url),
            encoding="utf-8",
        )
        with Daemon(tmp_path, "--fake-clock", "2025-11-03T00:59:00Z:600") as daemon:
            daemon.wait_for("slot_finished")
            daemon.wait_for("slot_finished")
            code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
    assert code == 0, stderr
    done = [row for row in cycle_rows(tmp_path) if row.status == "done"]
    assert len(done) >= 6  # three agents, two slots
    assert_shorts_traded(tmp_path)
    assert_ledger_verifies(tmp_path)
    board = openbell(tmp_path, "leaderboard", "--market", "crypto", "--format", "json")
    assert board.returncode == 0, board.stderr
    rows = {row["name"]: row for row in json.loads(board.stdout)["leaderboards"][0]["rows"]}
    assert "mean_gross_exposure" in rows["pair-neutral"]
    assert "mean_gross_exposure" in rows["hedger"]
    assert "mean_gross_exposure" not in rows["equal-weight"]
