"""A rating agent in a replay of the bundled crypto bars, next to a baseline: the model's first
answer is not a valid report and goes back with the reason, every later one rates every symbol,
the ratings are traded as target weights through the toolbox, the report is in the trace, the
ledger verifies, the agent is on the leaderboard, and `report`'s calibration scores a planted
model that knows the next day (every call right) and one that rates against it (every call
wrong). The model is faked at the HTTP boundary with real-shaped completions."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from rich.console import Console
from starlette.applications import Starlette
from starlette.testclient import TestClient

from openbell.agents.baselines import build_agent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.recorder import Prices
from openbell.agents.rating.agent import RATINGS_TOOL, RatingAgent, RatingSettings
from openbell.agents.rating.report import stored_report
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import Rejection, utc
from openbell.markets.replay_source import ReplaySource
from openbell.ops.cli.trace import print_ratings
from openbell.ops.evaluation.rating_report import calibration_record
from openbell.ops.reports.market_reports import leaderboard
from openbell.ops.web.pages import page_routes
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.traces import cycle_trace
from openbell.store.verify import verify_ledger
from openbell_testkit.llm import ScriptedModel, completion
from openbell_testkit.replay import crypto_daily

DAYS = 6  # 2025-11-01 .. 2025-11-06, one slot a day at 00:00 UTC
BARS = ReplaySource.from_bundled("crypto", names=["crypto-1d"])


def rater(right: bool) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A model that rates each offered symbol by its return to the next day's slot (the test
    knows the future; the agent does not): strong buy when it rises, strong sell when it falls
    (the other way round when not `right`)."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["messages"][1]["content"]
        now = datetime.fromisoformat(re.search(r"Decision time: (\S+)\.", prompt).group(1))  # type: ignore[union-attr]
        symbols = re.findall(r"^([A-Z0-9]+/[A-Z]+): ", prompt, re.MULTILINE)
        ratings = []
        for symbol in symbols:
            start, end = BARS.quote_at(symbol, now), BARS.quote_at(symbol, now + timedelta(1))
            assert start is not None
            assert end is not None
            up = end.price > start.price
            rating = "strong_buy" if up == right else "strong_sell"
            if end.price == start.price:
                rating = "hold"
            ratings.append(
                {"symbol": symbol, "rating": rating, "confidence": 0.8, "rationale": "planted"}
            )
        return completion(json.dumps({"ratings": ratings}), usage=(700, 200))

    return answer


def make_agent(model: ScriptedModel, **settings: Any) -> RatingAgent:
    http = httpx.AsyncClient(transport=httpx.MockTransport(model.handler))
    return RatingAgent(
        name="rater",
        client=ChatClient(
            ClientConfig(base_url="https://llm.test/v1", model="scripted-1", api_key="sk-x"),
            http=http,
        ),
        settings=RatingSettings(lookback=10, **settings),
        prices=Prices(in_per_mtok=Decimal("0.27"), out_per_mtok=Decimal("1.10")),
    )


def replay(url: str, agent: RatingAgent, days: int = DAYS) -> Any:
    upgrade(url)
    return run_replay(
        ReplayPlan(
            store_url=url,
            start_at=utc(2025, 11, 1),
            end_at=utc(2025, 11, 1 + days),
            markets=(
                crypto_daily(agent, build_agent("equal_weight", "equal-weight", market="crypto")),
            ),
        )
    )


def rater_account(url: str) -> int:
    (account,) = [
        a for a in queries.accounts(make_engine(url), "crypto") if a.agent_kind == "rating"
    ]
    return account.account_id


def test_a_rating_agent_trades_a_replay_and_its_calls_are_scored(sqlite_url: str) -> None:
    model = ScriptedModel([completion("no JSON here, sorry"), *[rater(right=True)] * DAYS])
    done = replay(sqlite_url, make_agent(model, max_weight=Decimal("0.3")))
    assert (done.cycles_done, done.cycles_failed) == (2 * DAYS, 0)
    engine = make_engine(sqlite_url)
    verified = verify_ledger(engine)
    assert verified.ok, verified.lines()
    assert "one JSON object" in model.requests[1]["messages"][-1]["content"]
    assert len(model.requests) == DAYS + 1
    ledger = Ledger(engine)
    account = rater_account(sqlite_url)
    cycles = [c.cycle_id for c in queries.cycle_activity(engine, account)]
    assert len(cycles) == DAYS
    (row,) = [e for e in ledger.traces(cycles[0]) if e.tool == RATINGS_TOOL]
    report = stored_report(row.result or "")
    assert len(report) == 10  # every symbol of crypto10
    weights = {rating.symbol: weight for rating, weight in report}
    buys = {rating.symbol for rating, _ in report if rating.rating.value == "strong_buy"}
    assert buys
    assert sum(weights.values()) <= 1
    assert all(weights[symbol] > 0 for symbol in buys)
    assert all(weight == 0 for symbol, weight in weights.items() if symbol not in buys)
    # The weights were traded through the toolbox: a buy of each strong buy at the first cycle.
    orders = ledger.cycle_orders(cycles[0])
    assert not [o for o in orders if isinstance(o.outcome, Rejection)]
    assert {o.symbol for o in orders} == buys
    assert {o.target_weight for o in orders} == {weights[s] for s in buys}
    # A later cycle sells what the ratings dropped, before its buys.
    later = [ledger.cycle_orders(cycle) for cycle in cycles[1:]]
    sides = [[o.side for o in found] for found in later]
    assert any("sell" in found for found in sides)
    assert all(found == sorted(found, key=lambda side: side != "sell") for found in sides)
    assert ledger.cycle_usage(cycles[0]).tokens_in == 700 + 100  # the refused answer and one more
    board = leaderboard(engine, "crypto")
    assert {"rater", "equal-weight"} <= {row.agent for row in board.rows}
    # `trace` shows the report as a table.
    found = cycle_trace(engine, cycles[0])
    assert found is not None
    out = io.StringIO()
    print_ratings(found, Console(file=out, width=200))
    shown = out.getvalue()
    assert "ratings" in shown
    assert "strong buy" in shown
    assert "planted" in shown
    # So does the cycle's web page.
    page = TestClient(Starlette(routes=page_routes(engine))).get(f"/cycles/{cycles[0]}")
    assert page.status_code == 200
    assert page.text.count('<tr class="rating">') == 10
    assert "strong buy" in page.text
    (baseline,) = [a for a in queries.accounts(engine, "crypto") if a.agent_name == "equal-weight"]
    first = queries.cycle_activity(engine, baseline.account_id)[0].cycle_id
    other = TestClient(Starlette(routes=page_routes(engine))).get(f"/cycles/{first}")
    assert other.status_code == 200
    assert 'class="rating"' not in other.text  # the baseline's cycle has no report
    # The calibration: the planted model knew the next slot's price, so every call is right.
    record = calibration_record(engine, account, "crypto")
    assert record["rating_pairs"] == 10 * (DAYS - 1)  # the last report has no next slot yet
    assert record["rating_buy_hit_rate"] == 1.0
    assert record["rating_sell_hit_rate"] == 1.0
    assert record["rating_strong_buy_mean_return"] > 0 > record["rating_strong_sell_mean_return"]
    assert record["rating_rank_correlation"] > 0.5
    assert record["rating_buy_count"] == 0


def test_a_model_rating_against_the_next_day_is_scored_wrong(sqlite_url: str) -> None:
    model = ScriptedModel([rater(right=False)] * 3)
    done = replay(sqlite_url, make_agent(model), days=3)
    assert done.cycles_failed == 0
    engine = make_engine(sqlite_url)
    record = calibration_record(engine, rater_account(sqlite_url), "crypto")
    assert record["rating_pairs"] == 20
    assert record["rating_buy_hit_rate"] == 0.0
    assert record["rating_sell_hit_rate"] == 0.0
    assert record["rating_rank_correlation"] < -0.5


def test_a_model_that_never_gives_a_valid_report_fails_the_cycle(sqlite_url: str) -> None:
    bad = completion(json.dumps({"ratings": [{"symbol": "BTC/USDT", "rating": "moon"}]}))
    model = ScriptedModel([bad] * 10)
    done = replay(sqlite_url, make_agent(model, max_retries=1), days=2)
    assert done.cycles_failed == 2
    assert len(model.requests) == 4  # one answer and one retry per cycle
    engine = make_engine(sqlite_url)
    assert verify_ledger(engine).ok
    (cycle, _) = queries.cycle_activity(engine, rater_account(sqlite_url))
    found = Ledger(engine).traces(cycle.cycle_id)
    assert found[-1].role == "error"
    assert "RatingRefused" in (found[-1].content or "")
    assert "no valid rating report after 2 answers" in (found[-1].content or "")
    assert "must be one of" in (found[-1].content or "")
    assert not [e for e in found if e.tool == RATINGS_TOOL]


@pytest.mark.postgres
def test_a_rating_agent_replays_on_postgres(pg_url: str) -> None:
    model = ScriptedModel([rater(right=True)] * 3)
    done = replay(pg_url, make_agent(model), days=3)
    assert (done.cycles_done, done.cycles_failed) == (6, 0)
    engine = make_engine(pg_url)
    try:
        assert verify_ledger(engine).ok
        (account,) = [a for a in queries.accounts(engine, "crypto") if a.agent_kind == "rating"]
        record = calibration_record(engine, account.account_id, "crypto")
    finally:
        engine.dispose()
    assert record["rating_pairs"] == 20
    assert record["rating_buy_hit_rate"] == 1.0
