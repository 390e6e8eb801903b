"""The decision modes driven by the real LLM agent loop with a scripted model: what each mode's
prompt holds and which tools it offers, the structured final action placed through the toolbox,
failed validation fed back at most three times before the cycle ends with no trade, and
stockbench's four stages."""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from openbell.agents.masking import BLINDED_TOOLS, MaskingLevel, masker_for
from openbell.agents.modes import prompt_for_mode
from openbell.agents.modes.final_action import FEEDBACK_PREFIX
from openbell.agents.modes.screen import WINDOW, factors
from openbell.agents.modes.structured import NO_TRADE_SUMMARY
from openbell.markets.domain import Fill, NewsItem, Order, Rejection, RejectReason, Side
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.replay_source import ReplaySource
from openbell.store.ledger import Ledger
from openbell_testkit.agents import US_OPEN, make_arena
from openbell_testkit.llm import completion
from openbell_testkit.modes import run_llm
from openbell_testkit.store import fill_for

D = Decimal


pytestmark = pytest.mark.sqlite_only


def answer(payload: object) -> dict[str, object]:
    return completion(json.dumps(payload))


def buy(stock_id: str = "AAPL", shares: int = 3) -> dict[str, object]:
    reason = "Momentum leads."
    return {
        "stock_id": stock_id,
        "side": "buy",
        "shares": shares,
        "confidence": 0.6,
        "reason": reason,
    }


def test_open_research_offers_every_tool_but_masked_data(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    bright = run_llm(arena, [], US_OPEN, prompt=lambda ctx: prompt_for_mode("open-research"))
    offered = [t["function"]["name"] for t in bright.model.requests[0]["tools"]]
    assert offered == [spec.name for spec in bright.tools.specs]
    blind = run_llm(
        make_arena(ledger, "us", agent="blind"),
        [],
        US_OPEN,
        prompt=lambda ctx: prompt_for_mode("open-research", masking="blinded"),
    )
    offered = [t["function"]["name"] for t in blind.model.requests[0]["tools"]]
    assert offered == [s.name for s in blind.tools.specs if s.name not in BLINDED_TOOLS]
    assert "news and fundamentals are unavailable" in blind.messages()[0]["content"]


def test_fixed_candidate_has_the_table_and_no_tools(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    ran = run_llm(
        arena,
        [answer({"orders": [buy("AAPL", 3)]})],
        US_OPEN,
        prompt=lambda ctx: prompt_for_mode("fixed-candidate", top_k=5),
    )
    first = ran.model.requests[0]
    assert "tools" not in first or not first["tools"]
    system, user = (m["content"] for m in first["messages"])
    assert "no tools" in system
    assert '{"orders"' in system
    rows = re.findall(r"^(\S+) \| (\S+) \| (\S+) \| (\S+) \| (\S+)$", user, re.MULTILINE)
    assert rows[0] == ("stock_id", "last_close", "mom_20d_%", "vol_20d_%", "score")
    assert len(rows) == 6
    # the first row is the best score of the universe, computed from bars ended by now
    bars = arena.source.bars_between(
        list(arena.universe.symbols), "1d", US_OPEN - timedelta(days=60), US_OPEN
    )
    scored = [
        factors(symbol, [b.close for b in found if b.end_at <= US_OPEN])
        for symbol, found in bars.items()
    ]
    best = max((c for c in scored if c is not None), key=lambda c: (c.score, c.symbol))
    assert rows[1][0] == best.symbol
    assert rows[1][1] == str(best.last_close)
    assert len([c for c in scored if c is not None]) > 5
    assert WINDOW == 20
    assert [type(o.outcome) for o in ran.orders] == [Fill]
    assert ran.tools.finished


def test_memory_only_has_identifiers_and_the_account_but_no_prices(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    ran = run_llm(
        arena,
        [answer({"orders": []})],
        US_OPEN,
        prompt=lambda ctx: prompt_for_mode("memory-only"),
    )
    first = ran.model.requests[0]
    assert "tools" not in first or not first["tools"]
    text = "\n".join(m["content"] for m in first["messages"])
    assert "AAPL" in text
    assert "MSFT" in text
    assert "cash 10000" in text
    user = first["messages"][1]["content"]
    for word in ("NAV", "weight", "price", "close"):
        assert word not in user
    snapshot = arena.source.bars_between(
        ["AAPL", "MSFT", "NVDA"], "1d", US_OPEN - timedelta(5), US_OPEN
    )
    for bars in snapshot.values():
        for bar in bars:
            for price in (bar.open, bar.close, bar.high, bar.low):
                assert str(price) not in text
    assert ran.orders == []
    assert ran.tools.finished


def test_failed_validation_is_fed_back_three_times_then_no_trade(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    script = [
        completion("I would buy Apple."),
        answer({"orders": [{**buy(), "side": "short"}]}),
        answer({"orders": [buy("IBM")]}),
        answer({"orders": [{**buy(), "target_weight": 0.1}]}),
        answer({"orders": [buy()]}),  # never asked for
    ]
    ran = run_llm(arena, script, US_OPEN, prompt=lambda ctx: prompt_for_mode("memory-only"))
    assert len(ran.model.requests) == 4
    feedback = [m for m in ran.user_messages() if m.startswith(FEEDBACK_PREFIX)]
    assert len(feedback) == 3
    assert "no JSON" in feedback[0]
    assert "side" in feedback[1]
    assert "IBM" in feedback[2]
    assert ran.orders == []
    assert ran.tools.summary == NO_TRADE_SUMMARY.format(n=4)


def test_a_corrected_answer_is_placed(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    script = [answer({"orders": [buy("IBM")]}), answer({"orders": [buy("MSFT", 2)]})]
    ran = run_llm(arena, script, US_OPEN, prompt=lambda ctx: prompt_for_mode("memory-only"))
    assert [(o.symbol, o.quantity) for o in ran.orders] == [("MSFT", D(2))]
    assert ran.tools.summary == "Placed 1 order(s): filled."


@functools.cache
def source_with_news() -> ReplaySource:
    news = [
        NewsItem(symbol="AAPL", published_at=US_OPEN - timedelta(hours=2), title="Apple beats"),
        NewsItem(symbol="AAPL", published_at=US_OPEN - timedelta(hours=60), title="Too old"),
        NewsItem(symbol="AAPL", published_at=US_OPEN + timedelta(hours=1), title="The future"),
    ]
    return ReplaySource.from_bundled("us", names=["us-1d"], news=news)


def test_stockbench_runs_its_four_stages(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    arena.source = source_with_news()
    arena.gateway = PointInTimeGateway(arena.source)
    decrease = {"stock_id": "MSFT", "action": "decrease", "shares": 1, "confidence": 0.5}
    script = [
        answer({"selected": ["AAPL", "MSFT"]}),
        answer({"decisions": [{**decrease, "reason": "r"}]}),
        answer({"decisions": [
            {"stock_id": "AAPL", "action": "increase", "target_weight": 0.1, "confidence": 0.7,
             "reason": "beat"},
            {"stock_id": "MSFT", "action": "hold", "confidence": 0.5, "reason": "wait"},
        ]}),
    ]  # fmt: skip
    ran = run_llm(arena, script, US_OPEN, prompt=lambda ctx: prompt_for_mode("stockbench"))
    assert "tools" not in ran.model.requests[0] or not ran.model.requests[0]["tools"]
    overview, fundamentals, check = ran.user_messages()
    assert "Stage 1 of 4" in overview
    for symbol in arena.universe.symbols:
        assert f"\n{symbol} | held 0 | open " in overview
    assert "Apple beats" in overview
    assert "Too old" not in overview
    assert "The future" not in overview
    assert "Stage 2 of 4: fundamentals are not available in this run" in fundamentals
    assert "not_point_in_time" in fundamentals
    assert "Stage 3 of 4" in fundamentals
    assert check.startswith(FEEDBACK_PREFIX)
    assert "MSFT: decrease needs a holding" in check
    assert [(o.symbol, o.side.value) for o in ran.orders] == [("AAPL", "buy")]
    assert isinstance(ran.orders[0].outcome, Fill)
    assert ran.tools.finished
    calls = [t.tool for t in ran.traces if t.role == "tool"]
    assert calls == ["get_fundamentals", "place_order", "finish"]


def overview_line(overview: str, symbol: str) -> str:
    return next(line for line in overview.splitlines() if line.startswith(f"{symbol} | "))


def test_stockbench_overview_lists_the_last_seven_days_of_orders_from_the_ledger(
    ledger: Ledger,
) -> None:
    arena = make_arena(ledger, "us")
    earlier, later = US_OPEN - timedelta(days=1), US_OPEN + timedelta(days=1)

    def record(at: datetime, seq: int, symbol: str, side: Side, outcome: str) -> None:
        instrument = next(i for i in arena.universe.instruments if i.symbol == symbol)
        order = Order(instrument=instrument, side=side, quantity=D(5), placed_at=at, reason="r")
        result: Fill | Rejection = (
            fill_for(order, D(100))
            if outcome == "filled"
            else Rejection(reason=RejectReason.LOT_SIZE, message="m", at=at)
        )
        ledger.record_order(cycle_id=arena.claim(at), seq=seq, order=order, outcome=result)

    # StockBench's window: the orders of the 7 days before the slot, however many, newest first.
    record(US_OPEN - timedelta(days=8), 1, "AAPL", Side.BUY, "filled")  # too old
    record(US_OPEN - timedelta(days=7, seconds=1), 1, "NVDA", Side.BUY, "filled")  # just too old
    record(US_OPEN - timedelta(days=6), 1, "AAPL", Side.BUY, "filled")
    for seq, minutes in enumerate((0, 60, 120, 180), start=1):  # four AAPL buys: all shown
        record(earlier + timedelta(minutes=minutes), seq, "AAPL", Side.BUY, "filled")
    record(earlier + timedelta(minutes=180), 5, "MSFT", Side.SELL, "rejected")
    record(later, 1, "NVDA", Side.BUY, "filled")  # after the slot: never in its overview
    script = [answer({"selected": []}), answer({"decisions": []})]
    # A fresh builder, as after a restart: what it lists comes from the ledger alone.
    ran = run_llm(arena, script, US_OPEN, prompt=lambda ctx: prompt_for_mode("stockbench"))
    overview = ran.user_messages()[0]
    assert "recent actions of the last 7 days" in overview
    assert overview_line(overview, "AAPL").endswith(
        "| recent: " + "; ".join(["1d ago buy 5 filled"] * 4 + ["6d ago buy 5 filled"])
    )
    assert overview_line(overview, "MSFT").endswith("| recent: 1d ago sell 5 rejected (lot_size)")
    assert overview_line(overview, "NVDA").endswith("| recent: none")


def test_stockbench_without_news_reads_and_shows_none(ledger: Ledger) -> None:
    def run(agent: str, without: tuple[str, ...]) -> list[str]:
        arena = make_arena(ledger, "us", agent=agent)
        arena.source = source_with_news()
        arena.gateway = PointInTimeGateway(arena.source)
        script = [answer({"selected": ["AAPL"]}), answer({"decisions": []})]
        ran = run_llm(
            arena,
            script,
            US_OPEN,
            prompt=lambda ctx: prompt_for_mode("stockbench", without=without),
        )
        calls = [t.tool for t in ran.traces if t.role == "tool"]
        assert calls == ["get_fundamentals", "finish"]
        return [m["content"] for m in ran.model.requests[-1]["messages"]]

    full, ablated = run("full", ()), run("no-news", ("news",))
    removed = [line for text in full for line in text.splitlines()]
    for line in (line for text in ablated for line in text.splitlines()):
        removed.remove(line)  # every line the ablated run was shown, the full run was shown too
    assert removed == [
        (
            "News: the top 5 items of the last 48 h, if any, each stock's in an untrusted "
            "envelope (its age and title)."
        ),
        '    news {"untrusted":["2h ago: Apple beats"]}',
    ]


def test_stockbench_without_news_and_fundamentals_asks_for_decisions_at_once(
    ledger: Ledger,
) -> None:
    arena = make_arena(ledger, "us")
    arena.source = source_with_news()
    arena.gateway = PointInTimeGateway(arena.source)
    increase = {"stock_id": "AAPL", "action": "increase", "target_weight": 0.1, "confidence": 0.7}
    script = [answer({"decisions": [{**increase, "reason": "r"}]})]
    ran = run_llm(
        arena,
        script,
        US_OPEN,
        prompt=lambda ctx: prompt_for_mode("stockbench", without=("news", "fundamentals")),
    )
    (system, overview) = (m["content"] for m in ran.model.requests[0]["messages"])
    assert "three stages" in system
    assert "fundamentals" not in system
    assert "Stage 1 of 3" in overview
    assert "Apple beats" not in overview
    assert "News:" not in overview
    ask = overview.splitlines()[-1]
    assert ask.startswith('Stage 2 of 3: Answer with one JSON object: {"decisions"')
    assert [(o.symbol, o.side.value) for o in ran.orders] == [("AAPL", "buy")]
    calls = [t.tool for t in ran.traces if t.role == "tool"]
    assert calls == ["place_order", "finish"]  # no get_fundamentals, no get_news
    assert len(ran.model.requests) == 1


def test_only_stockbench_leaves_inputs_out() -> None:
    with pytest.raises(ValueError, match="only the stockbench mode"):
        prompt_for_mode("fixed-candidate", without=("news",))
    with pytest.raises(ValueError, match="cannot leave out"):
        prompt_for_mode("stockbench", without=("prices",))


def test_structured_modes_under_masking_trade_through_aliases(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    seen: list[str] = []

    def pick(body: dict[str, object]) -> dict[str, object]:
        messages = body["messages"]
        assert isinstance(messages, list)
        user = messages[1]["content"]
        seen.append(user)
        alias = re.findall(r"asset_\d{4}", user)[0]
        return answer({"orders": [buy(alias, 1)]})

    ran = run_llm(
        arena,
        [pick],
        US_OPEN,
        prompt=lambda ctx: prompt_for_mode("memory-only", masking=MaskingLevel.STOCK_BLIND),
        masker=masker_for("stock-blind"),
    )
    assert "AAPL" not in seen[0]
    assert len(ran.orders) == 1
    assert ran.orders[0].symbol in arena.universe
    assert isinstance(ran.orders[0].outcome, Fill)
