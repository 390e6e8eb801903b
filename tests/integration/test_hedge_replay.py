"""Herculean's Hedging workflow in a replay (issue 25 item 2), on SQLite and Postgres: an LLM agent
in `mode = "hedge"`, its model scripted behind a real HTTP server, researches, picks AAPL/MSFT
among the paper's eight assets (28 pairs), goes long-short, reverses, holds and closes; a second
hedger whose legs are too large for the margin has its long leg refused (insufficient margin) and
the short leg it was left with closed by the pair rule. At every cycle's end each account holds its
pair hedged or nothing, no margin call was needed, and the ledger verifies."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from openbell.agents.modes.hedge import RESEARCH_TOOLS
from openbell.agents.pair_rules import HERCULEAN_ASSETS
from openbell.ops.config.schema import load_config
from openbell.ops.wiring.planning import replay_from_config
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.hedge_pairs import HedgePick
from openbell.store.ledger import Ledger
from openbell.store.verify import verify_ledger
from openbell_testkit.llm import ScriptedModel, completion, serve_script, tool_turn

#: Each hedger's answers per session, in order: the ones refused come first.
PLANS: dict[str, dict[str, list[dict[str, Any]]]] = {
    "hedger-model": {
        "2025-10-01": [
            {"pair": ["AAPL", "QQQ"], "action": "long-short"},  # QQQ is not a candidate
            {"pair": ["AAPL", "MSFT"], "action": "Long-Short", "reason": "AAPL leads MSFT"},
        ],
        "2025-10-02": [{"action": "hold"}],
        "2025-10-03": [
            {"pair": ["NVDA", "TSLA"], "action": "close"},  # the pair is fixed for the run
            {"pair": ["AAPL", "MSFT"], "action": "short_long", "reason": "the spread turned"},
        ],
        "2025-10-06": [{"action": "hold"}],
        "2025-10-07": [{"action": "close", "reason": "done"}],
        "2025-10-08": [{"action": "hold"}],
    },
    "oversized-model": {
        "2025-10-01": [{"pair": ["NVDA", "TSLA"], "action": "long-short"}],
        **{day: [{"action": "hold"}] for day in ("2025-10-02", "2025-10-03", "2025-10-06")},
        **{day: [{"action": "hold"}] for day in ("2025-10-07", "2025-10-08")},
    },
}


def hedge_script(body: dict[str, Any]) -> dict[str, Any]:
    """One turn of either hedger: first the bars of AAPL and MSFT, then its plan's next answer."""
    messages = body["messages"]
    day = re.search(r"Now: (\d{4}-\d{2}-\d{2})", messages[1]["content"])
    assert day is not None
    if not any(message["role"] == "tool" for message in messages):
        return tool_turn(
            ("get_bars", {"symbol": "AAPL", "interval": "1d", "lookback": 5}),
            ("get_bars", {"symbol": "MSFT", "interval": "1d", "lookback": 5}),
        )
    answered = sum(
        1 for message in messages if message["role"] == "assistant" and message["content"]
    )
    plan = PLANS[body["model"]][day.group(1)]
    return completion(json.dumps(plan[answered]))


def config_text(db_url: str, base_url: str) -> str:
    hedger = (
        'kind = "llm"\nmode = "hedge"\nmarkets = ["us"]\nallow_short = true\n'
        f'base_url = "{base_url}"\n'
    )
    return (
        f'[store]\nurl = "{db_url}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
        '[markets.us]\nuniverse = "nasdaq100"\ncadence = "daily"\nsource = "yfinance"\n'
        'initial_cash = "10000"\n\n'
        f'[[agents]]\nname = "hedger"\n{hedger}model = "hedger-model"\n\n'
        f'[[agents]]\nname = "oversized"\n{hedger}model = "oversized-model"\n'
        'hedge_leg_weight = "0.9"\n'
    )


def orders_by_slot(db_url: str, account_id: int) -> dict[date, list[tuple[str, ...]]]:
    """Each slot's orders: (symbol, side, status, reject reason or fill quantity, reason)."""
    engine = make_engine(db_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT c.slot_at, o.symbol, o.side, o.status, o.reject_reason, o.reason, "
                    'f.quantity FROM "order" o JOIN cycle c ON c.id = o.cycle_id '
                    "LEFT JOIN fill f ON f.order_id = o.id "
                    "WHERE o.account_id = :account ORDER BY o.id"
                ),
                {"account": account_id},
            ).all()
    finally:
        engine.dispose()
    found: dict[date, list[tuple[str, ...]]] = {}
    for row in rows:
        slot = (
            row.slot_at
            if isinstance(row.slot_at, datetime)
            else datetime.fromisoformat(row.slot_at)
        )
        outcome = row.reject_reason if row.status == "rejected" else str(row.quantity)
        found.setdefault(slot.date(), []).append(
            (row.symbol, row.side, row.status, outcome, row.reason)
        )
    return found


def held_after_each_slot(
    by_slot: dict[date, list[tuple[str, ...]]], days: list[date]
) -> list[dict[str, Decimal]]:
    """The signed holdings after each of `days`, from the fills."""
    held: dict[str, Decimal] = {}
    after = []
    for day in days:
        for symbol, side, status, quantity, _reason in by_slot.get(day, []):
            if status != "filled":
                continue
            sign = 1 if side in ("buy", "cover") else -1
            held[symbol] = held.get(symbol, Decimal(0)) + sign * Decimal(quantity)
        after.append({symbol: q for symbol, q in held.items() if q != 0})
    return after


def test_a_hedger_picks_its_pair_trades_it_and_the_pair_rule_and_margin_hold(
    db_url: str, tmp_path: Path
) -> None:
    model = ScriptedModel([hedge_script] * 200)
    with serve_script(model) as base_url:
        path = tmp_path / "openbell.toml"
        path.write_text(config_text(db_url, base_url), encoding="utf-8")
        done = replay_from_config(
            load_config(path),
            start=date(2025, 10, 1),
            end=date(2025, 10, 8),
            market=None,
            resume=False,
            show_progress=False,
        )
    assert (done.slots, done.cycles_done, done.cycles_failed) == (6, 12, 0)
    first = model.requests[0]
    assert [tool["function"]["name"] for tool in first["tools"]] == list(RESEARCH_TOOLS)
    system = first["messages"][0]["content"]
    assert f"any two of: {', '.join(HERCULEAN_ASSETS)}; 28 pairs" in system
    assert "Long and short" in system  # the shorting rules are stated

    engine = make_engine(db_url)
    try:
        assert verify_ledger(engine).ok
        ledger = Ledger(engine)
        accounts = {a.agent_name: a for a in queries.accounts(engine, "us")}
        hedger, oversized = accounts["hedger"], accounts["oversized"]
        pick = ledger.hedge_pair(hedger.account_id, datetime.fromisoformat("2025-10-09T00:00Z"))
        assert pick is not None
        assert pick.pair == ("AAPL", "MSFT")
        cycles = queries.cycle_activity(engine, hedger.account_id)
        assert pick.cycle_id == cycles[0].cycle_id
        usage = [ledger.cycle_usage(c.cycle_id).parse_failures for c in cycles]
        assert usage == [1, 0, 1, 0, 0, 0]  # the two refused answers
        oversized_cycles = queries.cycle_activity(engine, oversized.account_id)
        rule_lines = [
            entry.content
            for entry in ledger.traces(oversized_cycles[0].cycle_id)
            if entry.role == "system" and entry.content.startswith("pair rule")
        ]
        assert rule_lines == ["pair rule: closed TSLA (filled)"]
    finally:
        engine.dispose()

    days = [date(2025, 10, day) for day in (1, 2, 3, 6, 7, 8)]
    by_slot = orders_by_slot(db_url, hedger.account_id)
    sides = {day: [(o[0], o[1], o[2]) for o in orders] for day, orders in by_slot.items()}
    assert sides == {
        days[0]: [("MSFT", "short", "filled"), ("AAPL", "buy", "filled")],
        days[2]: [
            ("AAPL", "sell", "filled"),
            ("MSFT", "cover", "filled"),
            ("AAPL", "short", "filled"),
            ("MSFT", "buy", "filled"),
        ],
        days[4]: [("AAPL", "cover", "filled"), ("MSFT", "sell", "filled")],
    }
    assert all(
        o[4].startswith("hedge AAPL vs MSFT: ") for orders in by_slot.values() for o in orders
    )
    assert by_slot[days[0]][0][4] == "hedge AAPL vs MSFT: long-short: AAPL leads MSFT"
    after = held_after_each_slot(by_slot, days)
    shapes = [
        "flat" if not held else ("long-short" if held["AAPL"] > 0 > held["MSFT"] else "short-long")
        for held in after
    ]
    assert shapes == ["long-short", "long-short", "short-long", "short-long", "flat", "flat"]
    assert all(set(held) <= {"AAPL", "MSFT"} for held in after)

    refused = orders_by_slot(db_url, oversized.account_id)
    assert [(o[0], o[1], o[2], o[3]) for o in refused[days[0]]] == [
        ("TSLA", "short", "filled", refused[days[0]][0][3]),
        ("NVDA", "buy", "rejected", "insufficient_margin"),
        ("TSLA", "cover", "filled", refused[days[0]][0][3]),  # all of it
    ]
    assert refused[days[0]][2][4].startswith(
        "pair rule: NVDA vs TSLA ended the cycle with one leg alone"
    )
    assert set(refused) == {days[0]}  # it held nothing afterwards, so it traded nothing
    for account in (hedger, oversized):
        reasons = [
            o[4] for orders in orders_by_slot(db_url, account.account_id).values() for o in orders
        ]
        assert not any(reason.startswith("margin call") for reason in reasons)


def test_a_pick_is_stored_once_and_read_point_in_time(ledger: Ledger) -> None:
    at = datetime.fromisoformat("2025-10-01T13:30Z")
    agent_id = ledger.ensure_agent("hedger", "llm", at)
    account = ledger.open_account(agent_id, "us", "USD", Decimal(10000), at)
    cycle = ledger.claim_cycle(account, at, "run", at + timedelta(hours=1), at)
    assert cycle is not None
    assert ledger.hedge_pair(account, at) is None
    pick = HedgePick(account_id=account, first="AAPL", second="MSFT", cycle_id=cycle, picked_at=at)
    assert ledger.save_hedge_pair(pick) == pick
    later = HedgePick(account_id=account, first="NVDA", second="TSLA", cycle_id=cycle, picked_at=at)
    assert ledger.save_hedge_pair(later) == pick  # the first pick holds
    assert ledger.hedge_pair(account, at) == pick
    assert ledger.hedge_pair(account, at - timedelta(seconds=1)) is None  # not picked yet then
    with pytest.raises(ValueError, match="two different symbols"):
        HedgePick(account_id=account, first="AAPL", second="AAPL", cycle_id=cycle, picked_at=at)
