"""Replay markets over the bundled data, for the replay tests: A-shares and crypto, daily."""

from __future__ import annotations

from decimal import Decimal

from openbell.agents.protocol import Agent
from openbell.daemon.plan import MarketPlan
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import load_universe


def cn_daily(*agents: Agent) -> MarketPlan:
    """The SSE 50 over the bundled daily A-share bars (and the index), 100,000 CNY an account."""
    return MarketPlan(
        market="cn",
        source=ReplaySource.from_bundled("cn", names=["cn-1d", "cn-index-1d"]),
        universe=load_universe("sse50"),
        cadence="daily",
        initial_cash=Decimal(100000),
        agents=agents,
    )


def crypto_daily(*agents: Agent) -> MarketPlan:
    """The crypto10 universe over the bundled daily crypto bars, 10,000 USDT an account."""
    return MarketPlan(
        market="crypto",
        source=ReplaySource.from_bundled("crypto", names=["crypto-1d"]),
        universe=load_universe("crypto10"),
        cadence="daily",
        initial_cash=Decimal(10000),
        agents=agents,
    )
