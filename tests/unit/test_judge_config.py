"""FIDES' judge in the config (issue 25 item 4): `[judges.NAME]` tables of model endpoints, and a
strategy-code agent's `judge` naming one of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from openbell.markets.errors import InvalidConfig
from openbell.ops.config.schema import OpenbellConfig, StrategyCodeAgentConfig, load_config

MARKET = '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "ccxt:binance"\n'
MARKET += 'initial_cash = "10000"\n\n'
CODER = (
    '[[agents]]\nname = "coder"\nkind = "strategy_code"\nmarkets = ["crypto"]\n'
    'base_url = "http://127.0.0.1:9/v1"\nmodel = "coder-1"\n'
)
JUDGES = (
    '[judges.mini]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "gpt-4o-mini"\n'
    'api_key_env = "OPENAI_API_KEY"\n\n'
    '[judges.qwen]\nbase_url = "http://127.0.0.1:8/v1"\nmodel = "qwen-2.5-7b-instruct"\n'
    "temperature = 0.2\nmax_retries = 0\n\n"
)


def load(tmp_path: Path, text: str) -> OpenbellConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


def test_judges_load_and_an_agent_names_its_judge(tmp_path: Path) -> None:
    loaded = load(tmp_path, MARKET + JUDGES + CODER + 'judge = "mini"\n')
    assert sorted(loaded.judges) == ["mini", "qwen"]
    mini, qwen = loaded.judges["mini"], loaded.judges["qwen"]
    assert (mini.model, mini.temperature, mini.max_retries, mini.max_tokens) == (
        "gpt-4o-mini",
        0.0,  # the paper scores at temperature 0
        2,
        1024,
    )
    assert (qwen.model, qwen.temperature, qwen.max_retries) == ("qwen-2.5-7b-instruct", 0.2, 0)
    (agent,) = loaded.agents
    assert isinstance(agent, StrategyCodeAgentConfig)
    assert agent.judge == "mini"
    assert load(tmp_path, MARKET + CODER).judges == {}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (MARKET + CODER + 'judge = "mini"\n', "judge 'mini' is not configured"),
        (MARKET + JUDGES.replace('model = "gpt-4o-mini"\n', "") + CODER, "judges.mini.model"),
        (MARKET + JUDGES + '[judges.bad]\nbase_url = "ftp://x"\nmodel = "m"\n\n' + CODER,
         "judges.bad.base_url"),
        (MARKET + JUDGES.replace("max_retries = 0", "max_retries = 11") + CODER,
         "judges.qwen.max_retries"),
        (MARKET + JUDGES.replace("max_retries = 0", "tools = 1") + CODER, "judges.qwen.tools"),
        (MARKET + JUDGES + CODER.replace('kind = "strategy_code"', 'kind = "rating"')
         + 'judge = "mini"\n', "judge"),
    ],
)  # fmt: skip
def test_bad_judges_are_config_errors(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(InvalidConfig) as raised:
        load(tmp_path, text)
    assert says in str(raised.value)
