"""Two rating agents writing Market Insights reports in a replay of the bundled crypto bars, on
accounts allowed to short, each judged by a scripted judge; raters and judges are faked at the HTTP
boundary with real-shaped completions. The sells and strong sells are held short by the signed rule
and the ledger verifies; every report's eight sections and the judge's verdict are stored; the
report quality, the return of the ratings and Herculean's quality-versus-return regression in
`report` equal what this file computes from the scripts and the bundled bars by itself (a two-way
within transform for the fixed effects; scipy for the p-values where installed)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.rating.agent import (
    INSIGHT_TOOL,
    RATINGS_TOOL,
    RatingAgent,
    RatingSettings,
)
from openbell.agents.rating.quality_judge import QUALITY_TOOL, RUBRIC, ReportJudge, stored_verdict
from openbell.agents.rating.report import SECTIONS, Rating, stored_report
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import Rejection, utc
from openbell.markets.universes import load_universe
from openbell.ops.evaluation.benchmark import bundled_source
from openbell.ops.evaluation.insights_report import insights_record
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.verify import verify_ledger
from openbell_testkit.llm import Body, ScriptedModel, completion
from openbell_testkit.replay import crypto_daily

DAYS = 6  # 2025-11-01 .. 2025-11-06, one slot a day at 00:00 UTC
START = utc(2025, 11, 1)
SLOTS = [START + timedelta(days=day) for day in range(DAYS)]
#: The bars `report` prices from when no source is given (the benchmark's:
#: `ops.evaluation.benchmark`).
PRICED = bundled_source("crypto")
STEPS = ("strong_buy", "buy", "hold", "sell", "strong_sell")
AGENTS = {"alpha": 0, "beta": 1}  # name -> its offset in the scripts
MODELS = {"alpha": "model-a", "beta": "model-b"}
#: alpha answers badly on this day (twice, its one retry spent): the cycle fails, no report.
ALPHA_FAILS = 3
#: beta's judge answers badly twice for this (day, symbol): no verdict.
BETA_UNJUDGED = (2, "ETH/USDT")
ITEMS = sum(len(items) for items in RUBRIC.values())  # 12


def _day(text: str) -> int:
    found = re.search(r"Decision time: (\S+)\.", text)
    assert found is not None
    return (datetime.fromisoformat(found.group(1)) - START).days


def rating_of(agent: str, index: int, day: int) -> str:
    return STEPS[(index + day + AGENTS[agent]) % len(STEPS)]


def met_of(agent: str, index: int, day: int) -> int:
    """How many of the 12 rubric items the judge finds met in this report."""
    return (3 * index + day + 5 * AGENTS[agent]) % (ITEMS + 1)


def rater(agent: str) -> Callable[[Body], Body]:
    def answer(body: Body) -> Body:
        prompt = body["messages"][1]["content"]
        day = _day(prompt)
        if agent == "alpha" and day == ALPHA_FAILS:
            return completion("the market is closed for me today", usage=(700, 20))
        symbols = re.findall(r"^([A-Z0-9]+/[A-Z]+): ", prompt, re.MULTILINE)
        assert symbols == sorted(symbols)
        entries = [
            {
                "symbol": symbol,
                "rating": rating_of(agent, index, day),
                "confidence": 0.5,
                "rationale": "scripted",
                "report": {
                    name: f"{name}: met {met_of(agent, index, day)} for {symbol}"
                    for name in SECTIONS
                },
            }
            for index, symbol in enumerate(symbols)
        ]
        return completion(json.dumps({"ratings": entries}), usage=(700, 200))

    return answer


def judge(agent: str) -> Callable[[Body], Body]:
    def answer(body: Body) -> Body:
        text = body["messages"][1]["content"]
        found = re.search(r"met (\d+) for (\S+)", text)
        assert found is not None
        met, symbol = int(found.group(1)), found.group(2)
        if agent == "beta" and (_day(text), symbol) == BETA_UNJUDGED:
            return completion("fine", usage=(300, 5))
        marks = [i < met for i in range(ITEMS)]
        verdict: dict[str, Any] = {}
        for dimension, items in RUBRIC.items():
            verdict[dimension], marks = marks[: len(items)], marks[len(items) :]
        verdict["rationale"] = f"{met} of {ITEMS}"
        return completion(json.dumps(verdict), usage=(300, 30))

    return answer


def _client(model: ScriptedModel, name: str) -> ChatClient:
    return ChatClient(
        ClientConfig(base_url="https://llm.test/v1", model=name, api_key="sk-x", max_retries=0),
        http=model.client(),
    )


def make_agent(agent: str, judges: dict[str, ScriptedModel]) -> RatingAgent:
    judges[agent] = ScriptedModel([judge(agent)] * 200)
    return RatingAgent(
        name=agent,
        client=_client(ScriptedModel([rater(agent)] * 50), MODELS[agent]),
        settings=RatingSettings(
            lookback=5, max_retries=1, max_weight=Decimal("0.25"), insights=True
        ),
        judge=ReportJudge(_client(judges[agent], f"judge-of-{agent}")),
    )


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, ScriptedModel]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('insights') / 'state' / 'openbell.db'}"
    upgrade(url)
    judges: dict[str, ScriptedModel] = {}
    market = crypto_daily(*(make_agent(agent, judges) for agent in AGENTS))
    done = run_replay(
        ReplayPlan(
            store_url=url,
            start_at=START,
            end_at=START + timedelta(days=DAYS),
            markets=(dataclasses.replace(market, shorting_agents=frozenset(AGENTS)),),
        )
    )
    assert (done.slots, done.cycles_failed) == (DAYS, 1)  # alpha's day 3
    verified = verify_ledger(make_engine(url))
    assert verified.ok, verified.lines()
    return url, judges


def _cycles(url: str, agent: str) -> list[int]:
    engine = make_engine(url)
    (account,) = [a for a in queries.accounts(engine, "crypto") if a.agent_name == agent]
    return [c.cycle_id for c in queries.cycle_activity(engine, account.account_id)]


def _symbols() -> list[str]:
    """The crypto10 universe, every member offered over these days, in the prompt's order."""
    return sorted(load_universe("crypto10").symbols)


def test_a_shorting_rating_agent_holds_its_sells_short(replayed: tuple[str, Any]) -> None:
    url, _ = replayed
    ledger = Ledger(make_engine(url))
    first = _cycles(url, "alpha")[0]
    (row,) = [e for e in ledger.traces(first) if e.tool == RATINGS_TOOL]
    report = stored_report(row.result or "")
    symbols = [rating.symbol for rating, _ in report]
    assert len(symbols) == 10
    # Confidence 0.5 everywhere: scores step / 2, whose absolute values sum to 6 over the ten
    # symbols (steps 2, 1, 0, -1, -2 twice): each weight is step / 12, rounded towards zero.
    expected = {"strong_buy": "0.1666", "buy": "0.0833", "hold": "0", "sell": "-0.0833"}
    expected["strong_sell"] = "-0.1666"
    assert {rating.symbol: weight for rating, weight in report} == {
        symbol: Decimal(expected[rating_of("alpha", i, 0)]) for i, symbol in enumerate(symbols)
    }
    orders = ledger.cycle_orders(first)
    assert not [o for o in orders if isinstance(o.outcome, Rejection)]
    shorted = {o.symbol for o in orders if o.side == "short"}
    assert shorted == {s for i, s in enumerate(symbols) if "sell" in rating_of("alpha", i, 0)}
    assert {o.symbol for o in orders if o.side == "buy"} == {
        s for i, s in enumerate(symbols) if "buy" in rating_of("alpha", i, 0)
    }
    # The next day a symbol rated from sell up to hold or buy is covered (closed) first.
    second = ledger.cycle_orders(_cycles(url, "alpha")[1])
    assert [o.side for o in second].count("cover") >= 1


def test_the_sections_and_the_verdicts_are_stored(replayed: tuple[str, Any]) -> None:
    url, judges = replayed
    ledger = Ledger(make_engine(url))
    cycle = _cycles(url, "beta")[BETA_UNJUDGED[0]]
    traces = ledger.traces(cycle)
    sections = [json.loads(e.result or "") for e in traces if e.tool == INSIGHT_TOOL]
    assert len(sections) == 10
    assert list(sections[0]["report"]) == list(SECTIONS)
    verdicts = {
        v.symbol: v
        for v in (stored_verdict(e.result or "") for e in traces if e.tool == QUALITY_TOOL)
    }
    assert len(verdicts) == 10
    assert verdicts[BETA_UNJUDGED[1]].error is not None
    assert all(v.judge_model == "judge-of-beta" for v in verdicts.values())
    symbols = sorted(verdicts)
    index = symbols.index("BTC/USDT")
    met = met_of("beta", index, BETA_UNJUDGED[0])
    assert sum(m for m, _ in verdicts["BTC/USDT"].counts.values()) == met
    # The judge was shown the evidence the rater saw for the symbol, and the report.
    shown = [
        body["messages"][1]["content"]
        for body in judges["beta"].requests
        if "met " in body["messages"][1]["content"]
    ]
    assert any("BTC/USDT: " in text and "peers' mean return" in text for text in shown)
    # The judge's tokens are in its rows, not in the agent's usage: one answer of the rater.
    assert ledger.cycle_usage(cycle).tokens_in == 700
    assert sum(e.tokens_in or 0 for e in traces if e.tool == QUALITY_TOOL) >= 10 * 300


def expected_units() -> dict[tuple[str, str], tuple[float, float]]:
    """(agent, symbol) -> (quality, return of the ratings), from the scripts and the bars."""
    symbols = _symbols()
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for agent in AGENTS:
        for index, symbol in enumerate(symbols):
            scores: list[float] = []
            wealth = 1.0
            for day in range(DAYS):
                failed = agent == "alpha" and day == ALPHA_FAILS
                if failed:
                    scores.append(0.0)  # a missing report scores 0
                elif (agent, day, symbol) != ("beta", *BETA_UNJUDGED):
                    met, counted = met_of(agent, index, day), []
                    for items in RUBRIC.values():
                        counted.append(10 * min(max(met, 0), len(items)) / len(items))
                        met -= len(items)
                    scores.append(sum(counted) / 3)
                if day + 1 < DAYS:
                    now = PRICED.quote_at(symbol, SLOTS[day])
                    then = PRICED.quote_at(symbol, SLOTS[day + 1])
                    assert now is not None
                    assert then is not None
                    step = Rating(rating_of(agent, index, day)).step
                    exposure = 0.0 if failed else step / 2
                    wealth *= 1 + exposure * float(then.price / now.price - 1)
            out[agent, symbol] = (sum(scores) / len(scores), wealth - 1)
    return out


def test_report_quality_and_the_return_of_the_ratings(replayed: tuple[str, Any]) -> None:
    url, _ = replayed
    units = expected_units()
    for agent in AGENTS:
        record = insights_record(make_engine(url), agent, "crypto")
        mine = {s: q for (a, s), q in units.items() if a == agent}
        assert record["report_quality_by_symbol"] == pytest.approx(
            {s: round(q, 4) for s, (q, _) in mine.items()}
        )
        assert record["rating_return_by_symbol"] == pytest.approx(
            {s: r for s, (_, r) in mine.items()}, abs=2e-6
        )
        assert record["report_quality"] == pytest.approx(
            sum(q for q, _ in mine.values()) / len(mine), abs=1e-6
        )


def test_the_quality_versus_return_regression(replayed: tuple[str, Any]) -> None:
    url, _ = replayed
    record = insights_record(make_engine(url), "alpha", "crypto")
    units = expected_units()
    symbols = _symbols()

    # Two-way fixed effects on a balanced panel (2 agents, each its own model, x 10 symbols): the
    # within transform z - mean by symbol - mean by agent + grand mean, then the plain slope.
    def within(values: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
        grand = sum(values.values()) / len(values)
        by_symbol = {s: sum(values[a, s] for a in AGENTS) / len(AGENTS) for s in symbols}
        by_agent = {a: sum(values[a, s] for s in symbols) / len(symbols) for a in AGENTS}
        return {(a, s): v - by_symbol[s] - by_agent[a] + grand for (a, s), v in values.items()}

    x = within({key: q for key, (q, _) in units.items()})
    y = within({key: r for key, (_, r) in units.items()})
    sxx = sum(v * v for v in x.values())
    slope = sum(x[k] * y[k] for k in x) / sxx
    rss = sum((y[k] - slope * x[k]) ** 2 for k in x)
    df = len(units) - (1 + (len(symbols) - 1) + (len(AGENTS) - 1) + 1)
    stderr = math.sqrt(rss / df / sxx)
    returns = [r for _, r in units.values()]
    tss = sum((r - sum(returns) / len(returns)) ** 2 for r in returns)
    assert (record["quality_return_units"], record["quality_return_df"]) == (20, df) == (20, 8)
    assert record["quality_return_slope"] == pytest.approx(slope, rel=1e-5, abs=1e-6)
    assert record["quality_return_stderr"] == pytest.approx(stderr, rel=1e-5, abs=1e-6)
    assert record["quality_return_t"] == pytest.approx(slope / stderr, rel=1e-5)
    assert record["quality_return_r2"] == pytest.approx(1 - rss / tss, abs=2e-6)
    stats = pytest.importorskip("scipy.stats")
    p = 2 * stats.t.sf(abs(slope / stderr), df)
    assert record["quality_return_p"] == pytest.approx(p, abs=2e-6)
    rho = stats.spearmanr([q for q, _ in units.values()], returns)
    assert record["quality_return_spearman"] == pytest.approx(rho.statistic, abs=1e-6)
    assert record["quality_return_spearman_p"] == pytest.approx(rho.pvalue, abs=1e-6)
