"""The masking leak scan: a blinded replay of a few slots, an LLM agent (scripted behind
`httpx.MockTransport`) calling every tool with the aliases it was shown, in open-research,
fixed-candidate, stockbench and ktd-fin modes; every request the model received (messages and tool
schemas) and every stored trace row is scanned for any real ticker, code, company name, calendar
date, the universe's name, any real price or amount of money (the bars' prices and the fills'
prices, values, fees and cash after them, as the ledger holds them) and any real volume, and none
is found. The agent
still trades: aliases reach the real symbols."""

from __future__ import annotations

import json
import re
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine

from openbell.agents.ktd.contract import KTD_TOOLS
from openbell.agents.masking import MaskingLevel, masker_for
from openbell.agents.modes import prompt_for_mode
from openbell.agents.tools import openai_tools
from openbell.markets.domain import Fill, Side
from openbell.markets.universes import Universe
from openbell.store.ledger import Ledger
from openbell.store.verify import verify_ledger
from openbell_testkit.agents import CN_OPEN, DAY, INITIAL_CASH, US_OPEN, Arena, make_arena
from openbell_testkit.llm import call, completion, tool_turn
from openbell_testkit.modes import Cycle, run_llm

SEED = "leak-test"
_MONTHS = (
    r"\b(January|February|March|April|June|July|August|September|October|November|December)\b"
    r"|\bMay \d|\b(Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.? \d{1,2}\b"
)
DATE_PATTERNS = [
    re.compile(r"\d{4}-\d{2}-\d{2}"),
    re.compile(r"\d{4}/\d{2}/\d{2}"),
    re.compile(r"(?<![\d.])(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])(?!\d)"),
    re.compile(_MONTHS),
]


pytestmark = pytest.mark.sqlite_only


#: A number written whole (a sentence's full stop after it is not a decimal point).
NUMBER = re.compile(r"(?<![\d.])\d+(?:\.\d+)?(?!\.?\d)")
#: The fixed-candidate table's momentum, volatility and score columns: percentages and ratios,
#: which may equal some price by chance (its last_close column is a price, and is scanned).
RATIO_COLUMNS = re.compile(r"(asset_\d{4} \| [\d.]+)(?: \| -?[\d.]+){3}")


def forbidden(universe: Universe) -> list[re.Pattern[str]]:
    """Every real identifier of `universe` as a whole-token pattern."""
    words: set[str] = set()
    for instrument in universe.instruments:
        words.add(instrument.symbol)
        words.add(instrument.symbol.split(".")[0].split("/")[0])
        if instrument.name:
            words.add(instrument.name)
            words.add(re.sub(r"\s*\([^)]*\)", "", instrument.name).strip())
    if universe.benchmark:
        words.add(universe.benchmark)
    words.add(universe.name)
    return [
        re.compile(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])") for word in words if word
    ]


def amounts(values: list[Decimal]) -> set[str]:
    """The written forms of `values` a model could recognise: those with a decimal point and at
    least four significant digits (so lot sizes, budgets and the like are not counted)."""
    found = set()
    for value in values:
        text = str(value)
        digits = text.replace(".", "").replace("-", "").lstrip("0")
        if "." in text and len(digits) >= 4:
            found.add(text)
    return found


def real_money(arena: Arena, cycles: list[Cycle], first_slot: datetime) -> set[str]:
    """Every real price of the universe's bars up to a day after the last cycle (a quote is the
    open of the bar starting at its slot), and every fill's price, notional, fees and the cash
    after it, as written (see `amounts`)."""
    benchmark = arena.universe.benchmark
    symbols = [*arena.universe.symbols, *([benchmark] if benchmark else [])]
    last = max(cycle.tools.now for cycle in cycles) + DAY
    values: list[Decimal] = []
    for interval in arena.source.intervals:
        found = arena.source.bars_between(symbols, interval, first_slot - 400 * DAY, last)
        for bars in found.values():
            values.extend(v for bar in bars for v in (bar.open, bar.high, bar.low, bar.close))
    cash = INITIAL_CASH[arena.rules.market]
    for cycle in cycles:
        for order in cycle.orders:
            fill = order.outcome
            if isinstance(fill, Fill):
                if fill.side is Side.BUY:
                    cash -= fill.notional + fill.fees
                else:
                    cash += fill.notional - fill.fees
                values.extend((fill.price, fill.notional, fill.fees, cash))
    # the tool descriptions' own examples are not prices
    examples = json.dumps(openai_tools(cycles[0].tools.specs))
    return amounts(values) - set(NUMBER.findall(examples))


def real_volumes(arena: Arena, cycles: list[Cycle], first_slot: datetime) -> set[str]:
    """Every real volume of the universe's bars up to a day after the last cycle, written as the
    tools wrote it and without its trailing zeros, when it has at least five significant digits
    (a relative volume such as 1.234 is not one)."""
    benchmark = arena.universe.benchmark
    symbols = [*arena.universe.symbols, *([benchmark] if benchmark else [])]
    last = max(cycle.tools.now for cycle in cycles) + DAY
    found = set()
    for interval in arena.source.intervals:
        bars = arena.source.bars_between(symbols, interval, first_slot - 400 * DAY, last)
        for bar in (bar for series in bars.values() for bar in series):
            for written in (str(bar.volume), f"{bar.volume.normalize():f}"):
                if len(written.replace(".", "").strip("0")) >= 5:
                    found.add(written)
    return found


def aliases_in(body: dict[str, Any]) -> list[str]:
    """The aliases the model was shown in its first user message, in order."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return list(dict.fromkeys(re.findall(r"asset_\d{4}", user)))


def research_script(k: int) -> list[Any]:
    """Open research: every tool, with aliases read from the prompt; it buys the `k`th cheapest
    of the four stocks listed first (so an A-share lot fits its budget)."""

    def research(body: dict[str, Any]) -> dict[str, Any]:
        first = aliases_in(body)[0]
        return tool_turn(
            ("get_bars", {"symbol": first, "interval": "1d", "lookback": 5}),
            ("get_quote", {"symbols": aliases_in(body)[:4]}),
            ("get_news", {"symbol": first}),
            ("get_fundamentals", {"symbol": first}),
            ("calculate", {"expression": "10000 * 0.05"}),
            ("get_portfolio", {}),
            ("get_bars", {"symbol": "asset_0000"}),
        )

    def trade(body: dict[str, Any]) -> dict[str, Any]:
        results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        quotes = next(result["quotes"] for result in results if "quotes" in result)
        first = sorted(quotes, key=lambda quote: Decimal(quote["price"]))[k]["symbol"]
        return tool_turn(
            ("place_order", {"symbol": first, "side": "buy", "target_weight": 0.1,
                             "reason": "momentum", "confidence": 0.6}),
            ("place_order", {"symbol": first, "side": "sell", "shares": 10_000_000}),
        )  # fmt: skip

    return [research, trade, tool_turn(("finish", {"summary": "done"}))]


def ktd_fin_script() -> list[Any]:
    """KTD-Fin: each of its six research tools with the aliases shown, an answer in text, then
    the forced submission: a quarter of NAV in the cheapest of the stocks compared."""

    def research(body: dict[str, Any]) -> dict[str, Any]:
        shown = aliases_in(body)
        return tool_turn(
            ("get_market_context", {}),
            ("screen_candidates", {"top_k": 5}),
            ("get_stock_snapshot", {"stock_id": shown[0], "lookback": 30}),
            ("compare_candidates", {"stock_ids": shown[:10]}),
            ("get_portfolio_state", {}),
            ("risk_check", {"orders": [{"stock_id": shown[1], "side": "BUY", "shares": 100}]}),
            ("get_stock_snapshot", {"stock_id": "asset_0000"}),
        )

    def submit(body: dict[str, Any]) -> dict[str, Any]:
        results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        compared = next(result["stocks"] for result in results if "correlations" in result)
        cheapest = min(compared, key=lambda stock: Decimal(stock["last_close"]))["stock_id"]
        order = {"stock_id": cheapest, "side": "buy", "target_weight": 0.25, "confidence": 0.6,
                 "reason": "the cheapest compared"}  # fmt: skip
        return completion(None, [call("submit_action", {"orders": [order]}, "call_submit")])

    return [research, completion("Research done."), submit]


def stockbench_script() -> list[Any]:
    def pick(body: dict[str, Any]) -> dict[str, Any]:
        return completion(json.dumps({"selected": aliases_in(body)[:2]}))

    def decide(body: dict[str, Any]) -> dict[str, Any]:
        overview = re.findall(
            r"(asset_\d{4}) \| held \S+ \| open ([\d.]+)", body["messages"][1]["content"]
        )
        first = min(overview, key=lambda row: Decimal(row[1]))[0]  # the cheapest: a lot fits
        return completion(json.dumps({"decisions": [
            {"stock_id": first, "action": "increase", "target_weight": 0.1,
             "confidence": 0.6, "reason": "r"}
        ]}))  # fmt: skip

    return [pick, decide]


def fixed_candidate_script() -> list[Any]:
    def decide(body: dict[str, Any]) -> dict[str, Any]:
        user = body["messages"][1]["content"]
        table = user.split("candidates by score")[1]
        first = re.findall(r"asset_\d{4}", table)[0]
        order = {"stock_id": first, "side": "buy", "target_weight": 0.1, "confidence": 0.5,
                 "reason": "Top of the screen."}  # fmt: skip
        return completion(json.dumps({"orders": [order]}))

    return [decide]


def scan(cycles: list[Cycle], universe: Universe, money: set[str] | None = None) -> list[str]:
    """Every leak found in what the model saw and in the traces."""
    texts: list[str] = []
    for cycle in cycles:
        texts.extend(json.dumps(body, ensure_ascii=False) for body in cycle.model.requests)
        for trace in cycle.traces:
            texts.extend(t for t in (trace.content, trace.arguments, trace.result) if t)
    leaks = []
    for text in texts:  # a real amount written whole, as a number of its own
        prices = RATIO_COLUMNS.sub(r"\1", text)
        for amount in sorted(set(NUMBER.findall(prices)) & (money or set())):
            at = prices.index(amount)
            leaks.append(f"{amount!r} in ...{prices[max(at - 60, 0) : at + 60]}...")
    for pattern in [*forbidden(universe), *DATE_PATTERNS]:
        for text in texts:
            found = pattern.search(text)
            if found:
                start = max(found.start() - 60, 0)
                leaks.append(f"{found.group(0)!r} in ...{text[start : found.end() + 60]}...")
                break
    return leaks


@pytest.mark.parametrize(("market", "first_slot"), [("us", US_OPEN), ("cn", CN_OPEN)])
def test_a_blinded_replay_shows_no_real_ticker_name_or_date(
    ledger: Ledger, engine: Engine, market: str, first_slot: datetime
) -> None:
    arena = make_arena(ledger, market)
    masker = masker_for(MaskingLevel.BLINDED, seed=SEED)
    slots = arena.source.bar_starts("1d", first_slot, first_slot + 10 * DAY)  # session opens
    cycles: list[Cycle] = []
    for slot, (mode, script) in zip(
        slots,
        [
            ("open-research", research_script(0)),
            ("open-research", research_script(1)),
            ("stockbench", stockbench_script()),
            ("fixed-candidate", fixed_candidate_script()),
            ("ktd-fin", ktd_fin_script()),
        ],
        strict=False,
    ):

        def prompt(ctx: object, mode: str = mode) -> Any:
            return prompt_for_mode(mode, masking=MaskingLevel.BLINDED, masking_seed=SEED)

        cycles.append(run_llm(arena, script, slot, prompt=prompt, masker=masker))
    money = real_money(arena, cycles, first_slot)
    volumes = real_volumes(arena, cycles, first_slot)
    assert len(money) > 500
    assert len(volumes) > 500
    assert scan(cycles, arena.universe, money | volumes) == []
    # the scan had something to look at, and the agent traded through its aliases
    assert len(cycles) == 5
    results = [t.result or "" for c in cycles for t in c.traces if t.role == "tool"]
    ktd_tools = [t.tool for t in cycles[4].traces if t.role == "tool"]
    assert {*KTD_TOOLS, "submit_action"} <= set(ktd_tools)
    assert cycles[4].orders, "the ktd-fin cycle traded through its aliases"
    assert any('"code":"masked"' in r for r in results)
    assert any('"bars":[' in r for r in results)
    assert any("day_" in r for r in results)
    fills = [o for c in cycles for o in c.orders if isinstance(o.outcome, Fill)]
    assert len(fills) >= 3, [o.outcome for c in cycles for o in c.orders]
    assert {o.symbol for o in fills} <= set(arena.universe.symbols)
    assert verify_ledger(engine).ok


def test_the_scan_would_see_a_leak(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    script = [
        tool_turn(("get_quote", {"symbols": ["MSFT"]})),
        tool_turn(("place_order", {"symbol": "MSFT", "side": "buy", "shares": 3})),
        tool_turn(("get_bars", {"symbol": "MSFT", "interval": "1d", "lookback": 2})),
    ]
    bright = run_llm(arena, script, US_OPEN)
    volumes = real_volumes(arena, [bright], US_OPEN)
    leaks = scan([bright], arena.universe, real_money(arena, [bright], US_OPEN) | volumes)
    assert any("2025-10-01" in leak for leak in leaks)
    assert any("'nasdaq100'" in leak for leak in leaks)
    fill = bright.orders[0].outcome
    assert isinstance(fill, Fill)
    assert any(repr(str(fill.price)) in leak for leak in leaks)
    quoted = bright.model.tool_results(1)[0]["quotes"][0]["price"]
    assert any(repr(quoted) in leak for leak in leaks)
    bars = next(result for result in bright.model.tool_results() if "bars" in result)
    shown_volume = bars["bars"][-1]["volume"]
    assert any(repr(shown_volume) in leak for leak in leaks)
