"""Config to domain objects, shared by `openbell replay` and `openbell run`: universes, rules and
agents.

This module owns how one `[markets.<name>]` section becomes a `Universe` (a bundled one by name,
or the listed symbols) and its `MarketRules` (the market's defaults with the costs of its
`[markets.<name>.costs]` table), and how one `[[agents]]` entry becomes an `Agent` trading a
market (a baseline, or an LLM agent whose key is read from the environment), so that a replay and
the live daemon enrol the very same agents on the very same universes under the very same rules.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import date

from openbell.agents.baselines import build_agent
from openbell.agents.protocol import Agent
from openbell.markets.domain import Instrument
from openbell.markets.rules import MarketRules, rules_for, with_costs
from openbell.markets.universes import MARKET_CURRENCY, Universe, load_universe
from openbell.ops.config import AnyAgentConfig, LlmAgentConfig, MarketConfig, RandomAgentConfig
from openbell.ops.llm_agents import build_llm_agent


def universe_for(name: str, market: MarketConfig, as_of: date) -> Universe:
    """The universe of market `name`: the bundled one it names, or its listed symbols."""
    if isinstance(market.universe, str):
        return load_universe(market.universe)
    currency = MARKET_CURRENCY[name]
    return Universe(
        name=f"{name}-configured",
        market=name,
        as_of=as_of,
        instruments=tuple(
            Instrument(symbol=symbol, market=name, currency=currency) for symbol in market.universe
        ),
        source="openbell.toml",
    )


def rules_for_market(name: str, market: MarketConfig) -> MarketRules:
    """The rules of market `name`: its defaults with the costs its config sets in their place."""
    costs = market.costs
    return with_costs(
        rules_for(name),
        commission_bps=costs.commission_bps,
        commission_min=costs.commission_min,
        stamp_duty_sell_bps=costs.stamp_duty_sell_bps,
        transfer_fee_bps=costs.transfer_fee_bps,
        slippage_bps=costs.slippage_bps,
        min_notional=costs.min_notional,
    )


def agent_for(
    agent: AnyAgentConfig, market: str, environ: Mapping[str, str] | None = None
) -> Agent:
    """The agent of one `[[agents]]` entry, trading `market`."""
    if isinstance(agent, LlmAgentConfig):
        return build_llm_agent(agent, os.environ if environ is None else environ)
    seed = agent.seed if isinstance(agent, RandomAgentConfig) else None
    return build_agent(agent.kind, agent.name, market=market, seed=seed)
