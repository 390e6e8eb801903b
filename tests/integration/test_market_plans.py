"""One builder for live and replay (`ops.wiring.planning`): which recorded bars a market reads, by
source and run, and what a replay plan accepts as a source."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from openbell.daemon.clock import SimulatedClock
from openbell.daemon.plan import MarketPlan, ReplayPlan, open_accounts
from openbell.markets.domain import utc
from openbell.markets.errors import ConfigError
from openbell.markets.replay_source import ReplaySource
from openbell.markets.universes import load_universe
from openbell.ops.config.schema import BaselineAgentConfig, MarketConfig
from openbell.ops.wiring.planning import (
    OFFLINE_ENV,
    UnavailableSource,
    agent_for,
    make_source,
    market_plan,
)
from openbell.store.ledger import Ledger

CLOCK = SimulatedClock(utc(2025, 10, 13))


def _cn(source: str, cadence: str = "daily") -> MarketConfig:
    return MarketConfig(universe="sse50", cadence=cadence, source=source, initial_cash="100000")


def test_bundled_reads_every_bundled_file_of_the_market_as_it_is() -> None:
    """`bundled` is the demo's source: all the market's files, hourly ones too, no actions; a
    live source replayed stands for the cadence's files with the bundled dividends."""
    for clock in (CLOCK, None):
        bundled = make_source("cn", _cn("bundled"), clock, (), environ={OFFLINE_ENV: "1"})
        assert isinstance(bundled.source, ReplaySource)
        assert (bundled.source.name, bundled.source.intervals) == ("replay:cn", ("1h", "1d"))
        assert bundled.actions is None
    stand_in = make_source("cn", _cn("akshare"), None, ())
    assert isinstance(stand_in.source, ReplaySource)
    assert stand_in.source.intervals == ("1d",)
    assert stand_in.actions is not None


def test_only_a_live_run_of_a_live_source_is_live() -> None:
    live = make_source("cn", _cn("akshare"), CLOCK, (), environ={OFFLINE_ENV: "1"})
    assert isinstance(live.source, UnavailableSource)


def test_a_replay_refuses_bars_without_a_symbol_of_the_universe_and_a_live_run_does_not() -> None:
    missing = MarketConfig(
        universe=("000000.SH",), cadence="daily", source="bundled", initial_cash="100000"
    )
    live = market_plan("cn", missing, (), clock=CLOCK, as_of=CLOCK.now().date())
    assert live.universe.symbols == ("000000.SH",)
    with pytest.raises(ConfigError, match="no bars of any symbol"):
        market_plan("cn", missing, (), clock=None, as_of=CLOCK.now().date())


def test_a_replay_plan_refuses_a_live_source() -> None:
    source = UnavailableSource("akshare", "cn", "offline")
    market = MarketPlan(
        market="cn",
        source=source,
        universe=load_universe("sse50"),
        cadence="daily",
        initial_cash=Decimal(100000),
        agents=(),
    )
    start_at = CLOCK.now()
    with pytest.raises(TypeError, match="live source"):
        ReplayPlan(
            store_url="sqlite://",
            start_at=start_at,
            end_at=start_at + timedelta(days=1),
            markets=(market,),
        )


def test_the_config_s_allow_short_reaches_the_plan_and_the_accounts(ledger: Ledger) -> None:
    """An agent with `allow_short = true` is a shorting agent of its market's plan; its account
    is opened allowing shorts (and the config's shorting numbers are the plan's rules)."""
    us = MarketConfig.model_validate(
        {
            "universe": "nasdaq100",
            "cadence": "daily",
            "source": "bundled",
            "initial_cash": "10000",
            "shorting": {"initial_margin": "0.6"},
        }
    )
    agents = (
        BaselineAgentConfig(name="bear", kind="cash", markets=("us",), allow_short=True),
        BaselineAgentConfig(name="bull", kind="cash", markets=("us",)),
    )
    plan = market_plan("us", us, agents, clock=None, as_of=CLOCK.now().date())
    assert plan.shorting_agents == frozenset({"bear"})
    assert plan.rules is not None
    assert plan.rules.shorting is not None
    assert plan.rules.shorting.initial_margin == Decimal("0.6")
    opened = open_accounts(
        ledger,
        "us",
        plan.rules,
        plan.initial_cash,
        plan.agents,
        CLOCK.now(),
        shorting_agents=plan.shorting_agents,
    )
    allowed = {
        agent.name: ledger.account_state(account_id, CLOCK.now()).allow_short
        for account_id, agent in opened
    }
    assert allowed == {"bear": True, "bull": False}


def test_a_cn_plan_refuses_shorting_agents() -> None:
    bear = agent_for(BaselineAgentConfig(name="bear", kind="cash", markets=("cn",)), "cn")
    with pytest.raises(ValueError, match="A-shares cannot be shorted"):
        MarketPlan(
            market="cn",
            source=UnavailableSource("akshare", "cn", "offline"),
            universe=load_universe("sse50"),
            cadence="daily",
            initial_cash=Decimal(100000),
            agents=(bear,),
            shorting_agents=frozenset({"bear"}),
        )
