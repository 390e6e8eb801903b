"""The masking leak scan: a blinded replay of a few slots, an LLM agent (scripted behind
`httpx.MockTransport`) calling every tool with the aliases it was shown, in open-research,
fixed-candidate and stockbench modes; every request the model received (messages and tool
schemas) and every stored trace row is scanned for any real ticker, code, company name or
calendar date, and none is found. The agent still trades: aliases reach the real symbols."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import pytest
from agent_builders import CN_OPEN, DAY, US_OPEN, make_arena
from llm_script import completion, tool_turn
from mode_builders import Cycle, run_llm
from sqlalchemy import Engine

from openbell.agents.masking import MaskingLevel, masker_for
from openbell.agents.modes import prompt_for_mode
from openbell.markets.domain import Fill
from openbell.markets.universes import Universe
from openbell.store.ledger import Ledger
from openbell.store.verify import verify_ledger

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


@pytest.fixture
def db_url(sqlite_url: str) -> str:
    """This module's tests run on SQLite only (conftest's `engine` and `ledger` build on it)."""
    return sqlite_url


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
    return [
        re.compile(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])") for word in words if word
    ]


def aliases_in(body: dict[str, Any]) -> list[str]:
    """The aliases the model was shown in its first user message, in order."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return list(dict.fromkeys(re.findall(r"asset_\d{4}", user)))


def research_script(k: int) -> list[Any]:
    """Open research: every tool, with aliases read from the prompt; it buys the `k`th."""

    def research(body: dict[str, Any]) -> dict[str, Any]:
        first, second = aliases_in(body)[:2]
        return tool_turn(
            ("get_bars", {"symbol": first, "interval": "1d", "lookback": 5}),
            ("get_quote", {"symbols": [first, second]}),
            ("get_news", {"symbol": first}),
            ("get_fundamentals", {"symbol": first}),
            ("calculate", {"expression": "10000 * 0.05"}),
            ("get_portfolio", {}),
            ("get_bars", {"symbol": "asset_0000"}),
        )

    def trade(body: dict[str, Any]) -> dict[str, Any]:
        first = aliases_in(body)[k]
        return tool_turn(
            ("place_order", {"symbol": first, "side": "buy", "target_weight": 0.1,
                             "reason": "momentum", "confidence": 0.6}),
            ("place_order", {"symbol": first, "side": "sell", "shares": 10_000_000}),
        )  # fmt: skip

    return [research, trade, tool_turn(("finish", {"summary": "done"}))]


def stockbench_script() -> list[Any]:
    def pick(body: dict[str, Any]) -> dict[str, Any]:
        return completion(json.dumps({"selected": aliases_in(body)[:2]}))

    def decide(body: dict[str, Any]) -> dict[str, Any]:
        first = aliases_in(body)[7]
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
                 "reason": "r"}  # fmt: skip
        return completion(json.dumps({"orders": [order]}))

    return [decide]


def scan(cycles: list[Cycle], universe: Universe) -> list[str]:
    """Every leak found in what the model saw and in the traces."""
    texts: list[str] = []
    for cycle in cycles:
        texts.extend(json.dumps(body, ensure_ascii=False) for body in cycle.model.requests)
        for trace in cycle.traces:
            texts.extend(t for t in (trace.content, trace.arguments, trace.result) if t)
    leaks = []
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
            ("open-research", research_script(5)),
            ("open-research", research_script(6)),
            ("stockbench", stockbench_script()),
            ("fixed-candidate", fixed_candidate_script()),
        ],
        strict=False,
    ):

        def prompt(ctx: object, mode: str = mode) -> Any:
            return prompt_for_mode(mode, masking=MaskingLevel.BLINDED, masking_seed=SEED)

        cycles.append(run_llm(arena, script, slot, prompt=prompt, masker=masker))
    assert scan(cycles, arena.universe) == []
    # the scan had something to look at, and the agent traded through its aliases
    assert len(cycles) == 4
    results = [t.result or "" for c in cycles for t in c.traces if t.role == "tool"]
    assert any('"code":"masked"' in r for r in results)
    assert any('"bars":[' in r for r in results)
    assert any("day_" in r for r in results)
    fills = [o for c in cycles for o in c.orders if isinstance(o.outcome, Fill)]
    assert len(fills) >= 3, [o.outcome for c in cycles for o in c.orders]
    assert {o.symbol for o in fills} <= set(arena.universe.symbols)
    assert verify_ledger(engine).ok


def test_the_scan_would_see_a_leak(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    bright = run_llm(arena, [tool_turn(("get_portfolio", {}))], US_OPEN)
    leaks = scan([bright], arena.universe)
    assert any("2025-10-01" in leak for leak in leaks)
