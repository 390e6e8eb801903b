"""The rating agent's config keys: the endpoint as for an LLM agent, the closes shown, the retry
limit and the rule's parameters, each refused by name when wrong, and the agent built from them."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from openbell.agents.rating.agent import RatingAgent
from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import OpenbellConfig, RatingAgentConfig, load_config
from openbell.ops.config.secrets import configured_secrets
from openbell.ops.wiring.planning import agent_for
from openbell.ops.wiring.rating_agents import build_rating_agent

BASE = """
[markets.crypto]
universe = "crypto10"
cadence = "daily"
source = "ccxt:binance"
initial_cash = "10000"

[[agents]]
name = "analyst"
kind = "rating"
markets = ["crypto"]
base_url = "https://api.deepseek.com/v1"
model = "deepseek-chat"
api_key_env = "DEEPSEEK_API_KEY"
"""
KEY = {"DEEPSEEK_API_KEY": "sk-test-0123456789abcdef"}


def loaded(tmp_path: Path, extra: str = "") -> OpenbellConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(BASE + extra, encoding="utf-8")
    return load_config(path)


def entry(tmp_path: Path, extra: str = "") -> RatingAgentConfig:
    (agent,) = loaded(tmp_path, extra).agents_in("crypto")
    assert isinstance(agent, RatingAgentConfig)
    return agent


def test_the_defaults_and_the_agent_built_from_them(tmp_path: Path) -> None:
    config = entry(tmp_path)
    assert (config.interval, config.lookback, config.max_retries) == ("1d", 20, 2)
    assert (config.max_weight, config.rebalance_band) == (Decimal("0.25"), Decimal("0.01"))
    agent = agent_for(config, "crypto", KEY)
    assert (agent.name, agent.kind) == ("analyst", "rating")


def test_every_key_reaches_the_agent(tmp_path: Path) -> None:
    config = entry(
        tmp_path,
        'interval = "1h"\nlookback = 48\nmax_retries = 1\nmax_weight = "0.4"\n'
        'rebalance_band = "0.05"\n',
    )
    settings = build_rating_agent(config, KEY)._settings
    assert (settings.interval, settings.lookback, settings.max_retries) == ("1h", 48, 1)
    assert (settings.max_weight, settings.rebalance_band) == (Decimal("0.4"), Decimal("0.05"))


def test_the_prices_table_of_the_model_applies(tmp_path: Path) -> None:
    config = entry(
        tmp_path, '\n[prices."deepseek-chat"]\nin_per_mtok = "0.27"\nout_per_mtok = "1.1"\n'
    )
    assert (config.price_in_per_mtok, config.price_out_per_mtok) == (
        Decimal("0.27"),
        Decimal("1.1"),
    )


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ("max_weight = 0.25\n", "max_weight", "a float is not exact"),
        ('max_weight = "0"\n', "max_weight", "(0, 1]"),
        ('max_weight = "1.5"\n', "max_weight", "(0, 1]"),
        ('rebalance_band = "1"\n', "rebalance_band", "[0, 1)"),
        ('interval = "5m"\n', "interval", "'1d' or '1h'"),
        ("max_retries = 11\n", "max_retries", "less than or equal to 10"),
        ("lookback = 500\n", "lookback", "less than or equal to 250"),
        ("cpu_s = 3\n", "cpu_s", 'only agents of kind = "strategy_code" take it'),
        ('price_in_per_mtok = "0.2"\n', "price_in_per_mtok", "give both"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, extra: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        loaded(tmp_path, extra)
    message = str(caught.value)
    assert key in message
    assert words in message


def test_a_missing_variable_is_one_error_and_the_key_is_a_configured_secret(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match="DEEPSEEK_API_KEY is not set"):
        build_rating_agent(entry(tmp_path), {})
    secrets = configured_secrets(loaded(tmp_path), KEY)
    assert [s.source for s in secrets] == ["env DEEPSEEK_API_KEY"]


JUDGED = """report = "insights"

[agents.judge]
base_url = "https://judge.test/v1"
model = "judge-1"
api_key_env = "JUDGE_API_KEY"
"""


def test_a_judge_scores_market_insights_reports(tmp_path: Path) -> None:
    config = entry(tmp_path, JUDGED)
    assert config.report == "insights"
    assert config.judge is not None
    environ = {**KEY, "JUDGE_API_KEY": "sk-judge-0123456789abcdef"}
    agent = build_rating_agent(config, environ)
    assert agent._settings.insights
    assert agent._judge is not None
    assert agent._judge.model == "judge-1"
    secrets = configured_secrets(loaded(tmp_path, JUDGED), environ)
    assert [s.source for s in secrets] == ["env DEEPSEEK_API_KEY", "env JUDGE_API_KEY"]
    with pytest.raises(ConfigError, match="JUDGE_API_KEY is not set"):
        build_rating_agent(config, KEY)


def test_a_judge_needs_market_insights_reports(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        loaded(tmp_path, JUDGED.replace('report = "insights"', ""))
    assert "judge" in str(caught.value)
    assert 'report = "insights"' in str(caught.value)
    with pytest.raises(ConfigError, match="report"):
        loaded(tmp_path, 'report = "essay"\n')


NAMED = """report = "insights"
judge = "strict"

[judges.strict]
base_url = "https://judge.test/v1"
model = "judge-2"
api_key_env = "JUDGE_API_KEY"
max_tokens = 900
"""


def test_a_judge_may_be_named_as_a_strategy_code_agents_is(tmp_path: Path) -> None:
    config = entry(tmp_path, NAMED)
    assert config.judge is not None
    assert not isinstance(config.judge, str)
    assert (config.judge.model, config.judge.max_tokens) == ("judge-2", 900)
    environ = {**KEY, "JUDGE_API_KEY": "sk-judge-0123456789abcdef"}
    agent = agent_for(config, "crypto", environ)
    assert isinstance(agent, RatingAgent)
    assert agent._judge is not None
    assert agent._judge.model == "judge-2"
    secrets = configured_secrets(loaded(tmp_path, NAMED), environ)
    assert [s.source for s in secrets] == ["env DEEPSEEK_API_KEY", "env JUDGE_API_KEY"]
    # A name without its table is refused when the config is read, naming the key.
    with pytest.raises(ConfigError, match=r"agents\[0\]\.judge: judge 'lenient' is not configured"):
        loaded(tmp_path, NAMED.replace('judge = "strict"', 'judge = "lenient"'))
