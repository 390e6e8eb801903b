"""The strategy-code agent's config keys: the endpoint as for an LLM agent, the schedule, the bars
and the sandbox's limits, each refused by name when wrong, and the agent built from them."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from openbell.agents.strategy_code.sandbox import SandboxLimits
from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import OpenbellConfig, StrategyCodeAgentConfig, load_config
from openbell.ops.config.secrets import configured_secrets
from openbell.ops.wiring.sandboxing import Containment
from openbell.ops.wiring.strategy_agents import build_strategy_code_agent

#: Jails taken to run here: these tests build agents, they run none.
JAILED = Containment(probe=lambda kind: None)

BASE = """
[markets.crypto]
universe = "crypto10"
cadence = "daily"
source = "ccxt:binance"
initial_cash = "10000"

[[agents]]
name = "coder"
kind = "strategy_code"
markets = ["crypto"]
base_url = "https://api.deepseek.com/v1"
model = "deepseek-chat"
api_key_env = "DEEPSEEK_API_KEY"
"""


def loaded(tmp_path: Path, extra: str = "") -> OpenbellConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(BASE + extra, encoding="utf-8")
    return load_config(path)


def entry(tmp_path: Path, extra: str = "") -> StrategyCodeAgentConfig:
    (agent,) = loaded(tmp_path, extra).agents_in("crypto")
    assert isinstance(agent, StrategyCodeAgentConfig)
    return agent


def test_the_defaults_and_the_agent_built_from_them(tmp_path: Path) -> None:
    config = entry(tmp_path)
    assert (config.interval, config.lookback, config.rewrite_every) == ("1d", 250, 0)
    assert (config.max_retries, config.rebalance_band) == (3, Decimal("0.01"))
    agent = build_strategy_code_agent(
        config, {"DEEPSEEK_API_KEY": "sk-test-0123456789abcdef"}, JAILED
    )
    assert (agent.name, agent.kind) == ("coder", "strategy_code")


def test_every_key_reaches_the_agent(tmp_path: Path) -> None:
    config = entry(
        tmp_path,
        'interval = "1h"\nlookback = 48\nrewrite_every = 20\nmax_retries = 1\ncpu_s = 3\n'
        'memory_mb = 512\nwall_s = 7.5\nrebalance_band = "0.05"\n',
    )
    agent = build_strategy_code_agent(
        config, {"DEEPSEEK_API_KEY": "sk-test-0123456789abcdef"}, JAILED
    )
    settings = agent._settings
    assert (settings.interval, settings.lookback, settings.rewrite_every) == ("1h", 48, 20)
    assert (settings.max_retries, settings.rebalance_band) == (1, Decimal("0.05"))
    assert settings.limits == SandboxLimits(cpu_s=3, memory_mb=512, wall_s=7.5)


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
        ("rebalance_band = 0.01\n", "rebalance_band", "a float is not exact"),
        ('rebalance_band = "1.5"\n', "rebalance_band", "[0, 1)"),
        ('interval = "5m"\n', "interval", "'1d' or '1h'"),
        ("memory_mb = 100\n", "memory_mb", "greater than or equal to 256"),
        ("cpu_s = 0\n", "cpu_s", "greater than 0"),
        ("max_retries = 11\n", "max_retries", "less than or equal to 10"),
        ("lookback = 5000\n", "lookback", "less than or equal to 1000"),
        ('mode = "memory-only"\n', "mode", 'only agents of kind = "llm" take it'),
        ('price_in_per_mtok = "0.2"\n', "price_in_per_mtok", "give both"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, extra: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        loaded(tmp_path, extra)
    message = str(caught.value)
    assert key in message
    assert words in message


def test_a_key_in_the_file_is_refused_and_a_missing_variable_is_one_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "openbell.toml"
    key = "sk-abcdefghijklmnopqrstuvwxyz0123"
    path.write_text(BASE.replace('"DEEPSEEK_API_KEY"', f'"{key}"'), encoding="utf-8")
    with pytest.raises(ConfigError, match="looks like an API key itself") as caught:
        load_config(path)
    assert key not in str(caught.value)
    with pytest.raises(ConfigError, match="DEEPSEEK_API_KEY is not set"):
        build_strategy_code_agent(entry(tmp_path), {}, JAILED)


def test_its_key_is_a_configured_secret(tmp_path: Path) -> None:
    secrets = configured_secrets(loaded(tmp_path), {"DEEPSEEK_API_KEY": "sk-live-0123456789abcd"})
    assert [s.source for s in secrets] == ["env DEEPSEEK_API_KEY"]
