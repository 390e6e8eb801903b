"""The config loader: every malformed file is one ConfigError line naming the file and the key."""

from __future__ import annotations

import tomllib
from datetime import time
from decimal import Decimal
from pathlib import Path

import pytest
from pydantic import ValidationError

from openbell.agents.factor_model import FactorModel
from openbell.markets.domain import MARKETS
from openbell.markets.errors import ConfigError
from openbell.markets.rules import rules_for
from openbell.ops.config.schema import (
    FactorModelAgentConfig,
    LlmAgentConfig,
    MarketsConfig,
    OpenbellConfig,
    PythonAgentConfig,
    RandomAgentConfig,
    default_config_text,
    load_config,
    resolve_secret,
)
from openbell.ops.wiring.planning import agent_for, rules_for_market

KEY_LITERAL = "sk-3f9a7c1e5b2d4f6a8c0e1d3b5f7a9c2e"

BASE = """\
[markets.us]
universe = "nasdaq100"
cadence = "daily"
source = "yfinance"
initial_cash = "10000"

[markets.cn]
universe = ["600519", "000001"]
cadence = "daily"
source = "akshare"
initial_cash = "100000"

[[agents]]
name = "cash"
kind = "cash"
markets = ["us", "cn"]
"""

LLM_AGENT = """
[[agents]]
name = "deepseek-v3"
kind = "llm"
markets = ["us"]
base_url = "https://api.deepseek.com/v1"
model = "deepseek-chat"
api_key_env = "DEEPSEEK_API_KEY"
"""

PYTHON_AGENT = """
[[agents]]
name = "mine"
kind = "python"
markets = ["us"]
entry = "my_strategies.momentum:Momentum"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "openbell.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


MALFORMED = [
    # (id, file text, key path, words the message must contain)
    ("unknown top-level key", 'colour = "red"\n' + BASE, "colour", "unknown key"),
    ("unknown key in [store]", '[store]\nurll = "x"\n' + BASE, "store.urll", "did you mean 'url'"),
    (
        "unknown key in a market",
        BASE.replace('cadence = "daily"\nsource = "yfinance"', 'cadense = "daily"'),
        "markets.us.cadense",
        "did you mean 'cadence'",
    ),
    ("unknown market", BASE + '[markets.eu]\nuniverse = "x"\n', "markets.eu", "unknown key"),
    ("unknown key in an agent", BASE + 'colour = "red"\n', "agents[0].colour", "unknown key"),
    ("llm key on a baseline", BASE + 'model = "gpt"\n', "agents[0].model", 'kind = "llm"'),
    ("python key on a baseline", BASE + 'entry = "m:C"\n', "agents[0].entry", 'kind = "python"'),
    (
        "python agent without entry",
        BASE + PYTHON_AGENT.replace('entry = "my_strategies.momentum:Momentum"\n', ""),
        "agents[1].entry",
        "missing required key",
    ),
    (
        "python agent with a malformed entry",
        BASE + PYTHON_AGENT.replace("momentum:Momentum", "momentum:"),
        "agents[1].entry",
        '"package.module:Class" or the name of an entry point',
    ),
    (
        "unknown key in a python agent",
        BASE + PYTHON_AGENT + 'class = "Momentum"\n',
        "agents[1].class",
        "unknown key",
    ),
    (
        "agent name like a token",
        BASE.replace('name = "cash"', 'name = "obt_momentum_v1"'),
        "agents[0].name",
        "openbell token",
    ),
    ("options no table", BASE + PYTHON_AGENT + "options = 3\n", "agents[1].options", "table"),
    ("wrong type: url", "[store]\nurl = 5\n" + BASE, "store.url", "valid string"),
    (
        "wrong type: universe",
        BASE.replace('"nasdaq100"', "100"),
        "markets.us.universe",
        "universe name",
    ),
    (
        "unknown universe",
        BASE.replace('"nasdaq100"', '"sp500"'),
        "markets.us.universe",
        "unknown universe 'sp500'",
    ),
    (
        "universe of another market",
        BASE.replace('"nasdaq100"', '"sse50"'),
        "markets.us.universe",
        "'cn' market",
    ),
    (
        "wrong type: agent markets",
        BASE.replace('markets = ["us", "cn"]', 'markets = "us"'),
        "agents[0].markets",
        "should be a list",
    ),
    ("wrong type: section", 'log = "json"\n' + BASE, "log", "should be a table"),
    (
        "bad enum: cadence",
        BASE.replace('cadence = "daily"', 'cadence = "weekly"', 1),
        "markets.us.cadence",
        "Input should be 'daily' or 'hourly'",
    ),
    (
        "bad enum: agent kind",
        BASE.replace('kind = "cash"', 'kind = "momentum"'),
        "agents[0].kind",
        "'buy_and_hold'",
    ),
    (
        "bad enum: llm mode",
        BASE + LLM_AGENT + 'mode = "vibes"\n',
        "agents[1].mode",
        "'open-research'",
    ),
    ("bad enum: log level", '[log]\nlevel = "loud"\n' + BASE, "log.level", "'info'"),
    (
        "bad enum: third-party log level",
        '[log]\nthird_party_level = "chatty"\n' + BASE,
        "log.third_party_level",
        "'info'",
    ),
    (
        "float cash",
        BASE.replace('initial_cash = "10000"', "initial_cash = 10000.5"),
        "markets.us.initial_cash",
        'quoted string: initial_cash = "10000.5"',
    ),
    (
        "negative cash",
        BASE.replace('initial_cash = "10000"', 'initial_cash = "-1"'),
        "markets.us.initial_cash",
        "positive",
    ),
    (
        "bad slot",
        BASE.replace('source = "yfinance"', 'source = "yfinance"\nslots = ["09:30", "9:30pm"]'),
        "markets.us.slots[1]",
        '"HH:MM"',
    ),
    (
        "bad source",
        BASE.replace('source = "yfinance"', 'source = "bloomberg"'),
        "markets.us.source",
        "ccxt:EXCHANGE",
    ),
    (
        "duplicate agent names",
        BASE + '\n[[agents]]\nname = "cash"\nkind = "cash"\nmarkets = ["us"]\n',
        "agents[1].name",
        "defined twice",
    ),
    (
        "agent market not configured",
        BASE.replace('markets = ["us", "cn"]', 'markets = ["us", "crypto"]'),
        "agents[0].markets[1]",
        "[markets.crypto]",
    ),
    ("no market", "", "markets", "at least one"),
    (
        "corporate actions for crypto",
        BASE
        + '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "ccxt:binance"\n'
        + 'initial_cash = "10000"\ncorporate_actions = "crypto.csv"\n',
        "markets.crypto.corporate_actions",
        "crypto has no corporate actions",
    ),
    (
        "empty corporate actions path",
        BASE.replace('initial_cash = "10000"', 'initial_cash = "10000"\ncorporate_actions = ""'),
        "markets.us.corporate_actions",
        "at least 1 character",
    ),
    (
        "key literal instead of env name",
        BASE + LLM_AGENT.replace('"DEEPSEEK_API_KEY"', f'"{KEY_LITERAL}"'),
        "agents[1].api_key_env",
        "looks like an API key",
    ),
    (
        "lower-case env name",
        BASE + LLM_AGENT.replace('"DEEPSEEK_API_KEY"', '"deepseek key"'),
        "agents[1].api_key_env",
        "NAME of an environment variable",
    ),
    (
        "read token literal instead of env name",
        BASE + '\n[http]\nread_token_env = "s3cr3t-token"\n',
        "http.read_token_env",
        "NAME of an environment variable",
    ),
    (
        "unknown cost key",
        BASE + '\n[markets.cn.costs]\ncomission_bps = "5"\n',
        "markets.cn.costs.comission_bps",
        "did you mean 'commission_bps'",
    ),
    (
        "negative cost",
        BASE + '\n[markets.cn.costs]\nstamp_duty_sell_bps = "-5"\n',
        "markets.cn.costs.stamp_duty_sell_bps",
        "should not be negative",
    ),
    (
        "non-numeric cost",
        BASE + '\n[markets.us.costs]\nslippage_bps = "five"\n',
        "markets.us.costs.slippage_bps",
        "'five' is not a decimal number",
    ),
    (
        "float cost",
        BASE + "\n[markets.cn.costs]\ncommission_bps = 2.5\n",
        "markets.cn.costs.commission_bps",
        'quoted string: commission_bps = "2.5"',
    ),
    (
        "not-a-number cost",
        BASE + '\n[markets.cn.costs]\ncommission_min = "NaN"\n',
        "markets.cn.costs.commission_min",
        "should be a finite amount",
    ),
    (
        "bps of 100% or more",
        BASE + '\n[markets.us.costs]\nslippage_bps = "10000"\n',
        "markets.us.costs.slippage_bps",
        "below 10000 bps",
    ),
    (
        "costs not a table",
        BASE.replace('initial_cash = "10000"', 'initial_cash = "10000"\ncosts = "5"', 1),
        "markets.us.costs",
        "should be a table",
    ),
    (
        "price-limit buffer on a market without limits",
        BASE.replace(
            'initial_cash = "10000"', 'initial_cash = "10000"\nlimit_buffer_pct = "0.005"', 1
        ),
        "markets.us.limit_buffer_pct",
        "the us market has no daily price limits",
    ),
    (
        "price-limit buffer as wide as a limit",
        BASE.replace(
            'initial_cash = "100000"', 'initial_cash = "100000"\nlimit_buffer_pct = "0.05"'
        ),
        "markets.cn.limit_buffer_pct",
        "below the narrowest limit 0.05",
    ),
    (
        "float price-limit buffer",
        BASE.replace(
            'initial_cash = "100000"', 'initial_cash = "100000"\nlimit_buffer_pct = 0.005'
        ),
        "markets.cn.limit_buffer_pct",
        'quoted string: limit_buffer_pct = "0.005"',
    ),
    (
        "missing llm model",
        BASE + LLM_AGENT.replace('model = "deepseek-chat"\n', ""),
        "agents[1].model",
        "missing required key",
    ),
]


@pytest.mark.parametrize(
    ("text", "key_path", "words"),
    [pytest.param(text, key, words, id=name) for name, text, key, words in MALFORMED],
)
def test_malformed_config_names_file_and_key(
    tmp_path: Path, text: str, key_path: str, words: str
) -> None:
    path = write(tmp_path, text)
    message = load_error(path)
    assert message.startswith(f"{path}: {key_path}: "), message
    assert words in message


def test_a_python_agent_takes_its_entry_and_options_table(tmp_path: Path) -> None:
    text = BASE + PYTHON_AGENT + 'options = { lookback = 5, names = ["a"], deep = { x = 1 } }\n'
    agent = load_config(write(tmp_path, text)).agents[1]
    assert isinstance(agent, PythonAgentConfig)
    assert (agent.kind, agent.entry) == ("python", "my_strategies.momentum:Momentum")
    assert agent.options == {"lookback": 5, "names": ["a"], "deep": {"x": 1}}
    plain = load_config(write(tmp_path, BASE + PYTHON_AGENT)).agents[1]
    assert isinstance(plain, PythonAgentConfig)
    assert plain.options == {}


def test_a_key_literal_is_never_echoed(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + LLM_AGENT.replace('"DEEPSEEK_API_KEY"', f'"{KEY_LITERAL}"'))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert KEY_LITERAL not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.toml"
    message = load_error(path)
    assert message.startswith(f"{path}: no such file")
    assert "openbell init" in message


def test_bad_toml_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "\n[store\nurl = 1\n")
    message = load_error(path)
    assert message.startswith(f"{path}: invalid TOML: ")
    assert f"line {len(BASE.splitlines()) + 2}, column 7" in message


def test_several_errors_are_counted_on_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "a = 1\nb = 2\n" + BASE)
    assert load_error(path).endswith("(and 1 more)")


def test_default_config_loads_and_needs_no_secret(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, default_config_text()))
    assert config.store.url == "sqlite:///var/openbell.db"
    assert list(config.markets.configured()) == ["us", "cn", "crypto"]
    assert config.agents
    assert not any(isinstance(agent, LlmAgentConfig) for agent in config.agents)
    assert all(set(agent.markets) == set(MARKETS) for agent in config.agents)


def test_third_party_log_lines_are_asked_for_in_the_log_section(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, BASE)).log.third_party_level is None
    asked = load_config(write(tmp_path, '[log]\nthird_party_level = "info"\n' + BASE))
    assert asked.log.third_party_level == "info"


def test_default_config_matches_design_example_markets() -> None:
    raw = tomllib.loads(default_config_text())
    assert raw["markets"]["us"]["source"] == "yfinance"
    assert raw["markets"]["cn"]["source"] == "akshare"
    assert raw["markets"]["crypto"]["source"] == "ccxt:binance"


def test_values_are_typed(tmp_path: Path) -> None:
    text = BASE.replace('initial_cash = "10000"', 'initial_cash = "10000.10"')
    text = text.replace('source = "yfinance"', 'source = "replay:data/us.parquet"')
    text = text.replace('cadence = "daily"', 'cadence = "hourly"\nslots = ["09:30", "13:00"]', 1)
    config = load_config(write(tmp_path, text + LLM_AGENT))
    us = config.markets.configured()["us"]
    assert us.initial_cash == Decimal("10000.10")
    assert us.slots == (time(9, 30), time(13, 0))
    assert (us.source_kind, us.source_arg) == ("replay", "data/us.parquet")
    assert config.markets.configured()["cn"].universe == ("600519", "000001")
    llm = config.agents[1]
    assert isinstance(llm, LlmAgentConfig)
    assert (llm.mode, llm.masking, llm.api_key_env) == (
        "open-research",
        "bright",
        "DEEPSEEK_API_KEY",
    )
    assert [agent.name for agent in config.agents_in("cn")] == ["cash"]
    assert config.http.host == "127.0.0.1"
    assert config.http.port == 8787


def test_a_market_may_name_a_corporate_actions_file(tmp_path: Path) -> None:
    text = BASE.replace(
        'initial_cash = "10000"', 'initial_cash = "10000"\ncorporate_actions = "us.csv"'
    )
    config = load_config(write(tmp_path, text))
    markets = config.markets.configured()
    assert (markets["us"].corporate_actions, markets["cn"].corporate_actions) == ("us.csv", None)


def test_integer_cash_is_allowed(tmp_path: Path) -> None:
    text = BASE.replace('initial_cash = "10000"', "initial_cash = 10000")
    assert load_config(write(tmp_path, text)).markets.configured()["us"].initial_cash == 10000


KTD_FIN_COSTS = """
[markets.cn.costs]
commission_bps = "5"
commission_min = "5"
stamp_duty_sell_bps = "10"
transfer_fee_bps = 0
slippage_bps = "0"
"""


def test_costs_are_exact_decimals_and_default_to_none(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, BASE + KTD_FIN_COSTS))
    cn = config.markets.configured()["cn"].costs
    assert (
        cn.commission_bps,
        cn.commission_min,
        cn.stamp_duty_sell_bps,
        cn.transfer_fee_bps,
        cn.slippage_bps,
        cn.min_notional,
    ) == (Decimal(5), Decimal(5), Decimal(10), Decimal(0), Decimal(0), None)
    us = config.markets.configured()["us"].costs
    assert set(us.model_dump().values()) == {None}


def test_the_price_limit_buffer_reaches_the_markets_rules(tmp_path: Path) -> None:
    text = BASE.replace(
        'initial_cash = "100000"', 'initial_cash = "100000"\nlimit_buffer_pct = "0.005"'
    )
    markets = load_config(write(tmp_path, text)).markets.configured()
    assert markets["cn"].limit_buffer_pct == Decimal("0.005")
    limits = rules_for_market("cn", markets["cn"]).price_limits
    assert limits is not None
    assert limits.buffer_pct == Decimal("0.005")
    plain = load_config(write(tmp_path, BASE)).markets.configured()["cn"]
    assert rules_for_market("cn", plain) == rules_for("cn")


def test_random_agent_takes_a_seed(tmp_path: Path) -> None:
    text = BASE + '\n[[agents]]\nname = "dice"\nkind = "random"\nmarkets = ["us"]\nseed = 7\n'
    agent = load_config(write(tmp_path, text)).agents[1]
    assert isinstance(agent, RandomAgentConfig)
    assert agent.seed == 7


def test_factor_model_agent_takes_its_keys(tmp_path: Path) -> None:
    text = BASE + (
        '\n[[agents]]\nname = "lgbm"\nkind = "factor_model"\nmarkets = ["us"]\n'
        "top_k = 3\nretrain_sessions = 10\nseed = 4\n"
    )
    agent = load_config(write(tmp_path, text)).agents[1]
    assert isinstance(agent, FactorModelAgentConfig)
    assert (agent.top_k, agent.retrain_sessions, agent.seed) == (3, 10, 4)
    assert (agent.train_sessions, agent.label_sessions) == (60, 5)  # the defaults
    built = agent_for(agent, "us")
    assert isinstance(built, FactorModel)
    assert (built.top_k, built.retrain_sessions, built.seed) == (3, 10, 4)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("top_k = 0", "top_k"),
        ("train_sessions = 501", "train_sessions"),
        ("pairs = [['A', 'B']]", "pairs"),
    ],
)
def test_factor_model_keys_are_checked(tmp_path: Path, line: str, words: str) -> None:
    text = BASE + (
        f'\n[[agents]]\nname = "lgbm"\nkind = "factor_model"\nmarkets = ["us"]\n{line}\n'
    )
    assert words in load_error(write(tmp_path, text))


def test_config_is_frozen(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, BASE))
    with pytest.raises(ValidationError):
        config.store.url = "sqlite:///elsewhere.db"  # type: ignore[misc]


def test_market_sections_are_the_domain_markets() -> None:
    assert set(MarketsConfig.model_fields) == set(MARKETS)


def test_config_model_needs_a_market() -> None:
    with pytest.raises(ValidationError):
        OpenbellConfig.model_validate({})


def test_resolve_secret_reads_the_named_variable() -> None:
    assert resolve_secret("DEEPSEEK_API_KEY", {"DEEPSEEK_API_KEY": KEY_LITERAL}) == KEY_LITERAL


@pytest.mark.parametrize("environ", [{}, {"DEEPSEEK_API_KEY": "  "}])
def test_resolve_secret_refuses_unset_variable(environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="DEEPSEEK_API_KEY is not set"):
        resolve_secret("DEEPSEEK_API_KEY", environ)


def test_the_read_token_comes_from_the_variable_the_http_section_names(tmp_path: Path) -> None:
    path = tmp_path / "openbell.toml"
    path.write_text(BASE + '\n[http]\nread_token_env = "OPENBELL_READ_TOKEN"\n')
    http = load_config(path).http
    assert (
        http.read_token({"OPENBELL_READ_TOKEN": "tok-0123456789abcdef"}) == "tok-0123456789abcdef"
    )
    with pytest.raises(ConfigError, match=r"OPENBELL_READ_TOKEN is not set \(it is named by"):
        http.read_token({"OPENBELL_READ_TOKEN": " "})
    path.write_text(BASE)
    assert load_config(path).http.read_token({"OPENBELL_READ_TOKEN": "ignored"}) is None
