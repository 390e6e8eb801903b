"""The hedge mode in the config (Herculean's Hedging workflow, issue 25 item 2): `mode = "hedge"`
takes the paper's eight assets by default (28 candidate pairs) or `hedge_assets`, and a leg
weight; it needs `allow_short`, one market and bright masking; it is built under the pair rule."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from openbell.agents.modes import MODES, prompt_for_mode
from openbell.agents.modes.hedge import (
    HERCULEAN_ASSETS,
    HedgeEnforced,
    HedgePrompt,
    candidate_pairs,
    orientation,
)
from openbell.markets.errors import InvalidConfig
from openbell.ops.config.schema import LlmAgentConfig, load_config
from openbell.ops.wiring.planning import agent_for

MARKETS = """\
[markets.us]
universe = "nasdaq100"
cadence = "daily"
source = "yfinance"
initial_cash = "10000"

[markets.crypto]
universe = "crypto10"
cadence = "daily"
source = "ccxt:binance"
initial_cash = "10000"
"""
LLM = 'kind = "llm"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
HEDGE = LLM + 'mode = "hedge"\nallow_short = true\n'


def load(tmp_path: Path, entry: str) -> LlmAgentConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(MARKETS + '\n[[agents]]\nname = "h"\n' + entry)
    (agent,) = load_config(path).agents
    assert isinstance(agent, LlmAgentConfig)
    return agent


def test_the_default_candidates_are_the_papers_eight_assets_and_28_pairs(tmp_path: Path) -> None:
    agent = load(tmp_path, HEDGE + 'markets = ["us"]\n')
    assert agent.hedge_candidates == (
        "AAPL",
        "ADBE",
        "AMZN",
        "GOOGL",
        "META",
        "MSFT",
        "NVDA",
        "TSLA",
    )
    assert agent.hedge_candidates == HERCULEAN_ASSETS
    pairs = candidate_pairs(agent.hedge_candidates)
    assert len(pairs) == 28 == len(set(pairs))
    assert ("AAPL", "ADBE") in pairs
    assert agent.hedge_leg_weight == Decimal("0.5")
    built = agent_for(agent, "us", environ={})
    assert isinstance(built, HedgeEnforced)
    assert (built.name, built.kind) == ("h", "llm")
    assert "hedge" in MODES


def test_named_assets_and_leg_weight(tmp_path: Path) -> None:
    agent = load(
        tmp_path,
        HEDGE + 'markets = ["crypto"]\nhedge_assets = ["BTC/USDT", "ETH/USDT", "SOL/USDT"]\n'
        'hedge_leg_weight = "0.3"\n',
    )
    assert agent.hedge_candidates == ("BTC/USDT", "ETH/USDT", "SOL/USDT")
    assert len(candidate_pairs(agent.hedge_candidates)) == 3
    prompt = prompt_for_mode(
        "hedge", hedge_assets=agent.hedge_candidates, hedge_leg_weight=agent.hedge_leg_weight
    )
    assert isinstance(prompt, HedgePrompt)
    assert (prompt.assets, prompt.leg_weight) == (agent.hedge_candidates, Decimal("0.3"))
    with pytest.raises(ValueError, match="bright"):
        prompt_for_mode("hedge", masking="date-blind")


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        pytest.param(LLM + 'mode = "hedge"\nmarkets = ["us"]\n', "allow_short = true",
                     id="no-allow-short"),
        pytest.param(HEDGE + 'markets = ["us", "crypto"]\n', "one market", id="two-markets"),
        pytest.param(HEDGE + 'markets = ["crypto"]\n', "name this market's assets",
                     id="crypto-without-assets"),
        pytest.param(HEDGE + 'markets = ["us"]\nhedge_assets = ["AAPL"]\n', "at least two",
                     id="one-asset"),
        pytest.param(HEDGE + 'markets = ["us"]\nhedge_assets = ["AAPL", "MSFT", "AAPL"]\n',
                     "named twice", id="asset-twice"),
        pytest.param(HEDGE + 'markets = ["us"]\nmasking = "stock-blind"\n', "bright",
                     id="masked"),
        pytest.param(HEDGE + 'markets = ["us"]\nhedge_leg_weight = "1.5"\n', "(0, 1]",
                     id="leg-too-large"),
        pytest.param(HEDGE + 'markets = ["us"]\nhedge_leg_weight = 0.5\n', "quoted",
                     id="leg-as-float"),
        pytest.param(LLM + 'markets = ["us"]\nhedge_assets = ["AAPL", "MSFT"]\n',
                     'hedge_assets is for mode = "hedge"', id="assets-without-hedge-mode"),
        pytest.param(LLM + 'markets = ["us"]\nhedge_leg_weight = "0.4"\n',
                     'hedge_leg_weight is for mode = "hedge"', id="leg-without-hedge-mode"),
    ],
)  # fmt: skip
def test_bad_hedgers_are_config_errors(tmp_path: Path, entry: str, says: str) -> None:
    with pytest.raises(InvalidConfig) as raised:
        load(tmp_path, entry)
    assert says in str(raised.value)


def test_orientations() -> None:
    pair = ("A", "B")
    assert orientation({}, pair) == "flat"
    assert orientation({"A": Decimal(3), "B": Decimal(-2)}, pair) == "long-short"
    assert orientation({"A": Decimal(-3), "B": Decimal(2)}, pair) == "short-long"
    assert orientation({"A": Decimal(3)}, pair) == "broken"
    assert orientation({"A": Decimal(-3), "B": Decimal(-2)}, pair) == "broken"
    assert orientation({"C": Decimal(1)}, pair) == "flat"  # other holdings are the rule's
