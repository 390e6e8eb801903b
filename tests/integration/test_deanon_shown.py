"""The probe shows a model exactly what its `get_bars` tool shows it: the probe's series of a
trial, at every level, is the text the LLM loop's `serve_masked` gives a masked agent of the same
account (same seed, same rebasing) calling `get_bars` at the trial's time, with its alias, on a
real ledger."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from openbell.agents.llm.hooks import serve_masked
from openbell.agents.masking import MaskingLevel, build_masker
from openbell.agents.protocol import Agent, DecisionContext
from openbell.markets.gateway import PointInTimeGateway
from openbell.ops.evaluation.probes.deanon import ProbeSetup, draw_trials, shown_series
from openbell.store.ledger import Ledger
from openbell_testkit.agents import make_arena

pytestmark = pytest.mark.sqlite_only


class _Named:
    name = "probe-agent"

    async def decide(self, ctx: DecisionContext) -> None:  # pragma: no cover - never run
        raise AssertionError("not run")


@pytest.mark.parametrize("rebase", [None, True])
def test_the_probe_shows_what_get_bars_serves_a_masked_agent(
    ledger: Ledger, rebase: bool | None
) -> None:
    arena = make_arena(ledger, "us")
    setup = ProbeSetup(
        market="us",
        universe=arena.universe,
        rules=arena.rules,
        source=arena.source,
        interval="1h",
        lookback=7,
        trials=3,
        seed=5,
        masking_seed=9,
        rebase=rebase,
    )
    trials, _, _ = draw_trials(setup)
    agent: Agent = _Named()

    async def scenario() -> list[tuple[str, str]]:
        pairs = []
        for drawn in trials:
            trial = dataclasses.replace(drawn, number=arena.account_id)  # the arena's account
            tools = await arena.toolbox(trial.as_of)
            ctx = arena.context(agent, tools)
            for level in MaskingLevel:
                masker = build_masker(
                    level,
                    universe=arena.universe,
                    rules=arena.rules,
                    account_id=arena.account_id,
                    seed=9,
                    rebase=setup.rebased(level),
                )
                named = masker.mask_text(trial.symbol)  # the symbol as the model knows it
                called = await serve_masked(
                    ctx, masker, "get_bars", {"symbol": named, "interval": "1h", "lookback": 7}
                )
                gateway = PointInTimeGateway(arena.source)
                pairs.append((await shown_series(setup, gateway, trial, level), called.text))
        return pairs

    pairs = asyncio.run(scenario())
    assert len(pairs) == 3 * 4
    for probe_shows, tool_shows in pairs:
        assert probe_shows == tool_shows
    assert len({shown for shown, _ in pairs}) == len(pairs)  # four different texts per trial
