"""Replay markets over the bundled data, for the replay tests: A-shares and crypto, daily, and
the demo's crypto market into a ledger."""

from __future__ import annotations

import dataclasses
from datetime import date
from decimal import Decimal
from pathlib import Path

from openbell.agents.protocol import Agent
from openbell.daemon.plan import MarketPlan
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import load_universe
from openbell.ops.config.schema import OpenbellConfig
from openbell.ops.wiring.demo import DEMO_MARKETS, demo_config
from openbell.ops.wiring.planning import replay_from_config
from openbell.store.migrate import upgrade


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


def demo_crypto_replayed(db_url: str, folder: Path, start: date, end: date) -> OpenbellConfig:
    """The demo's crypto market (its baselines) replayed over `[start, end]` into the ledger at
    `db_url`, migrated first; returns the config it ran, to resume the replay further."""
    spec = next(spec for spec in DEMO_MARKETS if spec.market == "crypto")
    config = demo_config(folder / "unused.db", [dataclasses.replace(spec, start=start, end=end)])
    config = config.model_copy(update={"store": config.store.model_copy(update={"url": db_url})})
    upgrade(db_url)
    replay_from_config(
        config, start=start, end=end, market="crypto", resume=False, show_progress=False
    )
    return config
