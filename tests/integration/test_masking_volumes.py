"""Volumes under masking hold against the data. An attacker holds the real bundled bars and reads
what one masked agent is served: `get_bars` of every alias of its account, through the real
toolbox, gateway and masker on a real ledger (and, for an outside agent, through the MCP server).
At every level that hides the stock, no alias is mapped to its stock by volume: not by looking
the numbers up in the data (which also found the bar's date), not by their level, not by the
stocks' ranking by volume. The same attacks on the real volumes (what was served before) map
nearly every alias, so they are attacks that work. At `date-blind`, which shows the stock, the
numbers no longer give its dates away.

What is not hidden is asserted too, as the docs state it: the ratios between a series' bars,
searched against every window of the public series, still find the stock, and the returns do the
same with the prices."""

from __future__ import annotations

import asyncio
import json
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from openbell.agents.llm.hooks import serve_masked
from openbell.agents.masking import MaskingLevel, account_masker, masker_for
from openbell.agents.outside.agent import McpAgent
from openbell.agents.outside.hub import CycleHub, OutsideBudgets
from openbell.agents.protocol import DecisionContext
from openbell.daemon.mcp_http import serve_mcp
from openbell.markets.barfile import read_bundled
from openbell.markets.domain import Bar
from openbell.ops.evaluation.probes.deanon_scoring import ALPHA, tail_probability
from openbell.store.ledger import Ledger
from openbell_testkit.agents import CN_OPEN, US_OPEN, make_arena
from openbell_testkit.mcp import call, connect

pytestmark = pytest.mark.sqlite_only

#: (market, interval, bundled bar file, decision time): the US hourly bars (102 symbols) and the
#: A-share daily bars (50), each with 30 bars before the decision.
MARKETS = {
    "us": ("1h", "us-1h", US_OPEN + timedelta(days=14)),
    "cn": ("1d", "cn-1d", CN_OPEN + timedelta(days=14)),
}
LOOKBACK = 30
SEED = "volume-attack"
HIDING = (MaskingLevel.STOCK_BLIND, MaskingLevel.BLINDED)
#: Shown series: symbol (the truth, which the attacker does not have) -> (volumes, closes).
Shown = dict[str, tuple[list[Decimal], list[Decimal]]]


class _Named:
    name = "volume-agent"
    kind = "llm"

    async def decide(self, ctx: DecisionContext) -> None:  # pragma: no cover - never run
        raise AssertionError("not run")


def public(market: str) -> dict[str, tuple[Bar, ...]]:
    """Every bar of the market's bundled file, by symbol: what the attacker holds."""
    _, name, _ = MARKETS[market]
    bars = read_bundled(name)
    end = datetime(2100, 1, 1, tzinfo=UTC)
    return {symbol: tuple(bars.bars(symbol, end_by=end)) for symbol in bars.symbols}


def served(ledger: Ledger, market: str, level: MaskingLevel) -> Shown:
    """What an agent of `level` is served calling `get_bars` on each of its aliases (by the real
    symbol behind each: the attacker's answer key, never shown to it)."""
    interval, _, at = MARKETS[market]
    arena = make_arena(ledger, market, agent=f"volumes-{market}-{level.value}")

    async def scenario() -> Shown:
        tools = await arena.toolbox(at)
        ctx = replace(arena.context(_Named(), tools), masking_keys=ledger)
        masker = account_masker(level, ctx, seed=SEED)
        assert masker is not None
        found: Shown = {}
        for symbol in arena.universe.symbols:
            arguments = {
                "symbol": masker.mask_text(symbol),
                "interval": interval,
                "lookback": LOOKBACK,
            }
            called = await serve_masked(ctx, masker, "get_bars", arguments)
            result = json.loads(called.text)
            if "bars" in result and len(result["bars"]) == LOOKBACK:
                bars = result["bars"]
                found[symbol] = (
                    [Decimal(bar["volume"]) for bar in bars],
                    [Decimal(bar["close"]) for bar in bars],
                )
        return found

    return asyncio.run(scenario())


def real_windows(market: str, symbols: Sequence[str]) -> Shown:
    """The same windows with their real volumes and closes: what was served before masking
    touched volumes (the attacks must work on these)."""
    _, _, at = MARKETS[market]
    data = public(market)
    return {
        symbol: (
            [bar.volume for bar in window],
            [bar.close for bar in window],
        )
        for symbol in symbols
        if len(window := [bar for bar in data[symbol] if bar.end_at <= at][-LOOKBACK:]) == LOOKBACK
    }


# -- the attacks: each maps an alias (here: the symbol behind it) to a guess -------------------


def by_lookup(shown: Shown, data: Mapping[str, Sequence[Bar]]) -> dict[str, str | None]:
    """Look each shown volume up among every real volume; guess the stock most of them name."""
    index: dict[Decimal, set[str]] = {}
    for symbol, bars in data.items():
        for bar in bars:
            index.setdefault(bar.volume, set()).add(symbol)
    guesses: dict[str, str | None] = {}
    for truth, (volumes, _) in shown.items():
        votes = Counter(symbol for volume in volumes for symbol in index.get(volume, ()))
        guesses[truth] = votes.most_common(1)[0][0] if votes else None
    return guesses


def _level(volumes: Sequence[Decimal]) -> float:
    return statistics.median(math.log10(volume) for volume in volumes if volume > 0)


def window_levels(data: Mapping[str, Sequence[Bar]], at: datetime) -> dict[str, float]:
    """Each stock's volume level over the bars the agent was shown (the attacker is told the
    dates, which only a `stock-blind` agent sees: a stronger attacker than a blinded one)."""
    return {
        symbol: _level([bar.volume for bar in bars if bar.end_at <= at][-LOOKBACK:])
        for symbol, bars in data.items()
    }


def by_rank(shown: Shown, levels: Mapping[str, float]) -> dict[str, str | None]:
    """Rank the shown series by their volume level and the stocks by theirs; pair them in order
    (what survives any one factor applied to every stock)."""
    stocks = sorted(shown, key=lambda s: levels[s])
    aliases = sorted(shown, key=lambda s: _level(shown[s][0]))
    return dict(zip(aliases, stocks, strict=True))


def by_level(shown: Shown, levels: Mapping[str, float]) -> dict[str, str | None]:
    """Guess the stock whose volume level is nearest each series' level."""
    candidates = {s: levels[s] for s in shown}
    return {
        truth: min(candidates, key=lambda s: abs(candidates[s] - _level(volumes)))
        for truth, (volumes, _) in shown.items()
    }


def _changes(values: Sequence[Decimal]) -> npt.NDArray[np.float64]:
    logs = np.log(np.array([float(value) if value > 0 else 1.0 for value in values]))
    return np.diff(logs)


def _standardised(windows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each row minus its mean, over its norm (0 where flat): correlations are dot products."""
    centred_rows = windows - windows.mean(axis=-1, keepdims=True)
    norms = np.linalg.norm(centred_rows, axis=-1, keepdims=True)
    return np.divide(centred_rows, norms, out=np.zeros_like(centred_rows), where=norms > 0)


def by_ratios(shown: Shown, data: Mapping[str, Sequence[Bar]], field: int) -> dict[str, str]:
    """Search every window of every stock for the one whose bar-to-bar changes (of the volumes,
    `field` 0, or the closes, 1) correlate best with the series' (the residual: what a search of
    the public data still finds)."""
    width = LOOKBACK - 1
    windows: dict[str, npt.NDArray[np.float64]] = {}
    for symbol, bars in data.items():
        changes = _changes([bar.volume if field == 0 else bar.close for bar in bars])
        if len(changes) >= width:
            windows[symbol] = _standardised(sliding_window_view(changes, width))
    guesses = {}
    for truth, series in shown.items():
        target = _standardised(_changes(series[field]))
        guesses[truth] = max(windows, key=lambda symbol: float((windows[symbol] @ target).max()))
    return guesses


def centred(volumes: Sequence[Decimal]) -> bool:
    """Whether the median of `volumes` is 1 (to the rounding of what is shown)."""
    return abs(statistics.median(volumes) - 1) < Decimal("0.001")


def hits(guesses: Mapping[str, str | None]) -> int:
    return sum(guess == truth for truth, guess in guesses.items())


def above_chance(found: int, candidates: int) -> bool:
    """Whether `found` hits among `candidates` series is above a uniform guess (p < ALPHA)."""
    return tail_probability([1 / candidates] * candidates, found) < ALPHA


# -- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("market", list(MARKETS))
def test_the_attacks_work_on_real_volumes(market: str) -> None:
    data = public(market)
    real = real_windows(market, list(data))
    assert len(real) >= 50
    levels = window_levels(data, MARKETS[market][2])
    assert hits(by_lookup(real, data)) >= 0.95 * len(real)
    assert hits(by_rank(real, levels)) == len(real)
    assert hits(by_level(real, levels)) == len(real)


@pytest.mark.parametrize("level", HIDING, ids=[level.value for level in HIDING])
@pytest.mark.parametrize("market", list(MARKETS))
def test_no_alias_is_recovered_by_volume(ledger: Ledger, market: str, level: MaskingLevel) -> None:
    data = public(market)
    shown = served(ledger, market, level)
    assert len(shown) >= 50
    real_values = {bar.volume for bars in data.values() for bar in bars if bar.volume > 0}
    assert not [v for volumes, _ in shown.values() for v in volumes if v in real_values]
    assert hits(by_lookup(shown, data)) == 0
    levels = window_levels(data, MARKETS[market][2])
    for attack in (by_rank, by_level):
        found = hits(attack(shown, levels))
        assert not above_chance(found, len(shown)), (attack.__name__, found, len(shown))
    # every series centres on 1, whatever the stock trades
    assert all(centred(volumes) for volumes, _ in shown.values())


@pytest.mark.parametrize("market", list(MARKETS))
def test_a_date_blind_series_is_not_dated_by_its_volumes(ledger: Ledger, market: str) -> None:
    data = public(market)
    shown = served(ledger, market, MaskingLevel.DATE_BLIND)
    assert len(shown) >= 50
    for symbol, (volumes, _) in shown.items():  # the stock is shown: look in its own bars
        own = {bar.volume for bar in data[symbol] if bar.volume > 0}
        assert not [volume for volume in volumes if volume in own], symbol


@pytest.mark.parametrize("market", list(MARKETS))
def test_the_residual_a_search_by_ratios_finds_the_stock_as_returns_do(
    ledger: Ledger, market: str
) -> None:
    data = public(market)
    shown = served(ledger, market, MaskingLevel.BLINDED)
    by_volumes = hits(by_ratios(shown, data, 0))
    by_returns = hits(by_ratios(shown, data, 1))
    assert by_volumes >= 0.9 * len(shown)
    assert by_returns >= 0.9 * len(shown)


def test_an_outside_agent_is_served_relative_volumes_over_mcp(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us", agent="outside")
    agent = McpAgent(
        name="outside",
        hub=CycleHub(),
        budgets=OutsideBudgets(max_wall_s=20),
        masker=masker_for(MaskingLevel.BLINDED, seed=SEED),
    )
    at = MARKETS["us"][2]
    token = ledger.issue_agent_token("outside", at)

    async def scenario() -> list[dict[str, Any]]:
        tools = await arena.toolbox(at)
        ctx = replace(arena.context(agent, tools), journal=ledger, masking_keys=ledger)
        async with serve_mcp(agent.hub, ledger, host="127.0.0.1", port=0) as url:
            task = asyncio.create_task(agent.decide(ctx))
            async with connect(url, token) as session:
                waited, _ = await call(session, "wait_for_cycle")
                results = []
                for alias in waited["universe"][:10]:
                    found, _ = await call(session, "get_bars", symbol=alias, lookback=LOOKBACK)
                    results.append(found)
                await call(session, "finish", summary="done")
            await asyncio.wait_for(task, 10)
        return results

    results = asyncio.run(scenario())
    assert len(results) == 10
    real_values = {bar.volume for bars in public("us").values() for bar in bars}
    for result in results:
        volumes = [Decimal(bar["volume"]) for bar in result["bars"]]
        assert len(volumes) == LOOKBACK
        assert centred(volumes)
        assert not [volume for volume in volumes if volume in real_values]
