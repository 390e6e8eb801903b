"""Pair agents in the config: `kind = "pair_neutral"` and an LLM agent's `mode = "pair"` take
`pairs`, need `allow_short` and one market, refuse a symbol in two pairs, and are built as the
pair-neutral baseline and as an LLM agent under the pair rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from openbell.agents.modes import MODES, prompt_for_mode
from openbell.agents.modes.pair import PairPrompt
from openbell.agents.pair_rules import check_pairs, pair_state
from openbell.agents.pairs import PairEnforced, PairNeutral
from openbell.markets.errors import InvalidConfig
from openbell.ops.config.schema import (
    LlmAgentConfig,
    PairNeutralAgentConfig,
    default_config_text,
    load_config,
)
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
PAIRS = 'pairs = [["AAPL", "MSFT"], ["NVDA", "AMD"]]\n'
LLM = 'kind = "llm"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'


def load(tmp_path: Path, entry: str) -> object:
    path = tmp_path / "openbell.toml"
    path.write_text(MARKETS + '\n[[agents]]\nname = "p"\n' + entry)
    (agent,) = load_config(path).agents
    return agent


def test_pair_neutral_loads_and_builds(tmp_path: Path) -> None:
    agent = load(
        tmp_path,
        'kind = "pair_neutral"\nmarkets = ["us"]\nallow_short = true\n'
        + PAIRS
        + "momentum_sessions = 10\n",
    )
    assert isinstance(agent, PairNeutralAgentConfig)
    assert agent.pairs == (("AAPL", "MSFT"), ("NVDA", "AMD"))
    built = agent_for(agent, "us")
    assert isinstance(built, PairNeutral)
    assert (built.kind, built.sessions, built.pairs) == ("pair_neutral", 10, agent.pairs)


def test_pair_mode_loads_and_builds_under_the_pair_rule(tmp_path: Path) -> None:
    agent = load(tmp_path, LLM + 'mode = "pair"\nmarkets = ["us"]\nallow_short = true\n' + PAIRS)
    assert isinstance(agent, LlmAgentConfig)
    built = agent_for(agent, "us", environ={})
    assert isinstance(built, PairEnforced)
    assert (built.name, built.kind, built.pairs) == ("p", "llm", agent.pairs)
    assert "pair" in MODES
    prompt = prompt_for_mode("pair", pairs=agent.pairs)
    assert isinstance(prompt, PairPrompt)
    with pytest.raises(ValueError, match="bright"):
        prompt_for_mode("pair", masking="blinded", pairs=agent.pairs)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        pytest.param('kind = "pair_neutral"\nmarkets = ["us"]\n' + PAIRS, "allow_short = true",
                     id="no-allow-short"),
        pytest.param('kind = "pair_neutral"\nmarkets = ["us", "crypto"]\nallow_short = true\n'
                     + PAIRS, "one market", id="two-markets"),
        pytest.param('kind = "pair_neutral"\nmarkets = ["us"]\nallow_short = true\n'
                     'pairs = [["AAPL", "MSFT"], ["MSFT", "AMD"]]\n', "MSFT is in two pairs",
                     id="symbol-twice"),
        pytest.param('kind = "pair_neutral"\nmarkets = ["us"]\nallow_short = true\n'
                     'pairs = [["AAPL", "AAPL"]]\n', "two different symbols", id="same-symbol"),
        pytest.param('kind = "pair_neutral"\nmarkets = ["us"]\nallow_short = true\n'
                     'pairs = [["AAPL", "MSFT", "AMD"]]\n', "pairs", id="three-legs"),
        pytest.param('kind = "pair_neutral"\nmarkets = ["us"]\nallow_short = true\n',
                     "pairs", id="no-pairs"),
        pytest.param(LLM + 'mode = "pair"\nmarkets = ["us"]\nallow_short = true\n',
                     'needs pairs', id="pair-mode-without-pairs"),
        pytest.param(LLM + 'markets = ["us"]\nallow_short = true\n' + PAIRS,
                     'pairs are for mode = "pair"', id="pairs-without-pair-mode"),
        pytest.param(LLM + 'mode = "pair"\nmasking = "stock-blind"\nmarkets = ["us"]\n'
                     'allow_short = true\n' + PAIRS, "bright", id="masked-pair-mode"),
        pytest.param('kind = "cash"\nmarkets = ["us"]\n' + PAIRS, "pairs", id="pairs-on-cash"),
    ],
)  # fmt: skip
def test_bad_pair_agents_are_config_errors(tmp_path: Path, entry: str, says: str) -> None:
    with pytest.raises(InvalidConfig) as raised:
        load(tmp_path, entry)
    assert says in str(raised.value)


def test_pair_states() -> None:
    from decimal import Decimal

    pair = ("A", "B")
    assert pair_state({}, pair) == "flat"
    assert pair_state({"A": Decimal(1), "B": Decimal(-2)}, pair) == "hedged"
    assert pair_state({"A": Decimal(-1), "B": Decimal(2)}, pair) == "hedged"
    assert pair_state({"A": Decimal(1)}, pair) == "broken"
    assert pair_state({"A": Decimal(1), "B": Decimal(1)}, pair) == "broken"
    assert pair_state({"B": Decimal(-1), "C": Decimal(5)}, pair) == "broken"
    with pytest.raises(ValueError, match="at least one pair"):
        check_pairs([])


def test_the_default_configs_commented_pair_agent_is_valid(tmp_path: Path) -> None:
    text = default_config_text()
    block = text[text.index('# [[agents]]\n# name = "pair-neutral"') :]
    entry = "\n".join(line.removeprefix("# ") for line in block.splitlines())
    path = tmp_path / "openbell.toml"
    path.write_text(f"{text}\n{entry}\n")
    found = load_config(path).agents[-1]
    assert isinstance(found, PairNeutralAgentConfig)
    assert found.allow_short
