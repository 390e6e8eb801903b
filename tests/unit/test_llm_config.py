"""The LLM agent's config keys: prices as exact decimal strings, budgets, extra headers and body,
and the agent built from them (its key from the environment, never from the file)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from openbell.agents.llm.recorder import Prices
from openbell.agents.masking import AliasMasker
from openbell.agents.modes import DEFAULT_RESEARCH_CALLS
from openbell.agents.modes.ktd_fin import KtdFinPrompt
from openbell.agents.protocol import DecisionContext
from openbell.markets.domain import utc
from openbell.markets.errors import ConfigError
from openbell.markets.rules import rules_for
from openbell.markets.universes import load_universe
from openbell.ops.config.schema import LlmAgentConfig, OpenbellConfig, load_config
from openbell.ops.wiring.llm_agents import (
    build_llm_agent,
    masker_factory,
    prices_of,
    prompt_factory,
)

BASE = """
[markets.us]
universe = "nasdaq100"
cadence = "daily"
source = "yfinance"
initial_cash = "10000"

[[agents]]
name = "gpt"
kind = "llm"
markets = ["us"]
base_url = "https://api.openai.com/v1"
model = "gpt-4o-mini"
api_key_env = "OPENAI_API_KEY"
"""


def load(tmp_path: Path, extra: str) -> LlmAgentConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(BASE + extra, encoding="utf-8")
    agent = load_config(path).agents[0]
    assert isinstance(agent, LlmAgentConfig)
    return agent


def error(tmp_path: Path, extra: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, extra)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_defaults_are_the_design_budgets_and_no_prices(tmp_path: Path) -> None:
    agent = load(tmp_path, "")
    assert (agent.max_turns, agent.max_tool_calls) == (25, 50)
    assert (agent.max_tokens_per_cycle, agent.max_wall_s) == (120_000, 600.0)
    assert prices_of(agent) is None
    assert (agent.extra_headers, agent.extra_body) == ({}, {})


def test_every_key_is_read(tmp_path: Path) -> None:
    agent = load(
        tmp_path,
        'price_in_per_mtok = "0.15"\nprice_out_per_mtok = "0.60"\n'
        'price_cached_per_mtok = "0.075"\nmax_turns = 10\nmax_tool_calls = 20\n'
        "max_tokens_per_cycle = 50000\nmax_wall_s = 120\n"
        'extra_headers = { "HTTP-Referer" = "https://openbell.dev" }\n'
        'extra_body = { top_p = 0.9, reasoning = { effort = "low" } }\n',
    )
    prices = prices_of(agent)
    assert prices is not None
    assert (prices.in_per_mtok, prices.out_per_mtok, prices.cached_per_mtok) == (
        Decimal("0.15"),
        Decimal("0.60"),
        Decimal("0.075"),
    )
    built = build_llm_agent(agent, {"OPENAI_API_KEY": "sk-from-the-environment-123"})
    assert built.budgets.max_turns == 10
    assert built.budgets.max_tool_calls == 20
    assert built.budgets.max_tokens == 50_000
    assert built.budgets.max_wall_s == 120
    assert agent.extra_body == {"top_p": 0.9, "reasoning": {"effort": "low"}}


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ("price_in_per_mtok = 0.15\nprice_out_per_mtok = \"1\"\n", "price_in_per_mtok", "float"),
        ('price_in_per_mtok = "cheap"\nprice_out_per_mtok = "1"\n', "price_in_per_mtok", "decimal"),
        ('price_in_per_mtok = "-1"\nprice_out_per_mtok = "1"\n', "price_in_per_mtok",
         "non-negative"),
        ('price_in_per_mtok = "1"\n', "price_out_per_mtok", "both"),
        ('price_cached_per_mtok = "1"\n', "price_cached_per_mtok", "price_in_per_mtok"),
        ("max_turns = 0\n", "max_turns", "greater than 0"),
        ('max_tool_calls = "5"\n', "max_tool_calls", "integer"),
        ("max_wall_s = -1\n", "max_wall_s", "greater than 0"),
        ('extra_headers = { Authorization = "Bearer x" }\n', "extra_headers.Authorization",
         "api_key_env"),
        ('extra_headers = { "X-Api-Key" = "x" }\n', "extra_headers.X-Api-Key", "api_key_env"),
        ("extra_body = { messages = [] }\n", "extra_body.messages", "cannot be overridden"),
        ("max_turn = 3\n", "max_turn", "max_turns"),
    ],
)  # fmt: skip
def test_bad_values_name_the_key(tmp_path: Path, extra: str, key: str, words: str) -> None:
    message = error(tmp_path, extra)
    assert f"agents[0].{key}" in message or f"agents[0].llm.{key}" in message or key in message
    assert words in message


def test_a_missing_key_variable_is_a_config_error(tmp_path: Path) -> None:
    agent = load(tmp_path, "")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        build_llm_agent(agent, {})


def test_a_local_server_needs_no_key(tmp_path: Path) -> None:
    agent = load(tmp_path, "").model_copy(update={"api_key_env": None})
    assert build_llm_agent(agent, {}).name == "gpt"


def _context(account_id: int) -> DecisionContext:
    return DecisionContext(
        now=utc(2025, 10, 1, 14),
        market="us",
        agent_name="gpt",
        account_id=account_id,
        cycle_id=1,
        universe=load_universe("nasdaq100"),
        rules=rules_for("us"),
        tools=None,  # type: ignore[arg-type]  # the factories under test do not call tools
    )


@pytest.mark.parametrize(
    ("mode", "builder"),
    [
        ("open-research", "OpenResearchPrompt"),
        ("fixed-candidate", "FixedCandidatePrompt"),
        ("memory-only", "MemoryOnlyPrompt"),
        ("stockbench", "StockBenchPrompt"),
        ("ktd-fin", "KtdFinPrompt"),
    ],
)
def test_every_decision_mode_is_wired_in(tmp_path: Path, mode: str, builder: str) -> None:
    agent = load(tmp_path, f'mode = "{mode}"\n')

    built = prompt_factory(agent)(_context(1))

    assert type(built).__name__ == builder


def test_research_calls_bound_the_ktd_fin_research_phase_only(tmp_path: Path) -> None:
    agent = load(tmp_path, 'mode = "ktd-fin"\nresearch_calls = 7\n')
    built = prompt_factory(agent)(_context(1))
    assert isinstance(built, KtdFinPrompt)
    assert built.research_calls == 7
    default = prompt_factory(load(tmp_path, 'mode = "ktd-fin"\n'))(_context(1))
    assert isinstance(default, KtdFinPrompt)
    assert default.research_calls == DEFAULT_RESEARCH_CALLS
    assert "research_calls" in error(tmp_path, "research_calls = 7\n")
    assert "research_calls" in error(tmp_path, 'mode = "ktd-fin"\nresearch_calls = -1\n')


def test_stockbench_ablations_are_config_keys_of_that_mode_only(tmp_path: Path) -> None:
    agent = load(tmp_path, 'mode = "stockbench"\nwithout = ["news", "fundamentals"]\n')
    built = prompt_factory(agent)(_context(1))
    assert type(built).__name__ == "StockBenchPrompt"
    assert (built.with_news, built.with_fundamentals) == (False, False)  # type: ignore[attr-defined]
    assert "without" in error(tmp_path, 'mode = "fixed-candidate"\nwithout = ["news"]\n')
    assert "without" in error(tmp_path, 'mode = "stockbench"\nwithout = ["prices"]\n')
    assert "twice" in error(tmp_path, 'mode = "stockbench"\nwithout = ["news", "news"]\n')


def test_a_blinded_agent_masks_with_its_accounts_own_seeded_map(tmp_path: Path) -> None:
    agent = load(tmp_path, 'masking = "blinded"\nmasking_seed = 7\n')
    factory = masker_factory(agent)

    first, again, other = factory(_context(1)), factory(_context(1)), factory(_context(2))

    text = "AAPL closed at 2025-09-30"
    assert "AAPL" not in first.mask_text(text)
    assert "2025-09-30" not in first.mask_text(text)
    assert first.mask_text(text) == again.mask_text(text)
    assert first.mask_text("AAPL MSFT NVDA") != other.mask_text("AAPL MSFT NVDA")


@pytest.mark.parametrize(
    ("extra", "rebased"),
    [
        ('masking = "blinded"\n', True),
        ('masking = "blinded"\nrebase_prices = false\n', False),
        ('masking = "stock-blind"\n', False),
        ('masking = "stock-blind"\nrebase_prices = true\n', True),
        ('masking = "date-blind"\nrebase_prices = true\n', True),
    ],
)
def test_prices_are_rebased_by_default_when_blinded(
    tmp_path: Path, extra: str, rebased: bool
) -> None:
    agent = load(tmp_path, extra)
    masker = masker_factory(agent)(_context(1))
    assert isinstance(masker, AliasMasker)
    assert (masker.unit is not None) == rebased
    prompt = prompt_factory(agent)(_context(1))
    assert getattr(prompt, "rebase", None) == agent.rebase_prices


def test_rebasing_a_bright_agent_is_a_config_error(tmp_path: Path) -> None:
    message = error(tmp_path, "rebase_prices = true\n")
    assert "rebase_prices" in message
    assert "masking" in message
    assert "rebase_prices" in error(tmp_path, 'masking = "blinded"\nrebase_prices = "yes"\n')


def test_a_bright_agent_sees_real_names(tmp_path: Path) -> None:
    masker = masker_factory(load(tmp_path, ""))(_context(1))

    assert masker.mask_text("AAPL closed at 2025-09-30") == "AAPL closed at 2025-09-30"


def load_config_text(tmp_path: Path, text: str) -> OpenbellConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


SECOND_AGENT = """
[[agents]]
name = "gpt-blind"
kind = "llm"
markets = ["us"]
base_url = "https://api.openai.com/v1"
model = "gpt-4o-mini"
masking = "blinded"
price_in_per_mtok = "9"
price_out_per_mtok = "9"
"""
PRICE_TABLE = """
[prices."gpt-4o-mini"]
in_per_mtok = "0.15"
out_per_mtok = "0.60"
cached_per_mtok = "0.075"
"""


def test_a_models_price_table_prices_every_agent_of_it_without_its_own(tmp_path: Path) -> None:
    config = load_config_text(tmp_path, BASE + SECOND_AGENT + PRICE_TABLE)
    table, own = config.agents_in("us")
    assert isinstance(table, LlmAgentConfig)
    assert isinstance(own, LlmAgentConfig)
    assert prices_of(table) == Prices(
        in_per_mtok=Decimal("0.15"), out_per_mtok=Decimal("0.60"), cached_per_mtok=Decimal("0.075")
    )
    assert prices_of(own) == Prices(in_per_mtok=Decimal(9), out_per_mtok=Decimal(9))  # its own win
    unpriced = load_config_text(tmp_path, BASE + PRICE_TABLE.replace("gpt-4o-mini", "other"))
    assert prices_of(unpriced.agents_in("us")[0]) is None  # another model's table does not apply


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('[prices.m]\nin_per_mtok = 0.15\nout_per_mtok = "1"\n', "float"),
        ('[prices.m]\nin_per_mtok = "1"\n', "out_per_mtok"),
        ('[prices.m]\nin_per_mtok = "1"\nout_per_mtok = "-2"\n', "non-negative"),
        ('[prices.m]\nin_per_mtok = "1"\nout_per_mtok = "1"\ninput = "1"\n', "input"),
    ],
)
def test_a_bad_price_table_names_its_key(tmp_path: Path, table: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config_text(tmp_path, BASE + table)
    message = str(caught.value)
    assert "prices.m" in message
    assert words in message
    assert "\n" not in message


@pytest.mark.parametrize("value", ["flag", "split"])
def test_on_model_change_is_flag_or_split(tmp_path: Path, value: str) -> None:
    assert load(tmp_path, "").on_model_change == "flag"
    assert load(tmp_path, f'on_model_change = "{value}"\n').on_model_change == value


@pytest.mark.parametrize("value", ['"fork"', '"Split"', "true", '""'])
def test_any_other_on_model_change_is_a_config_error(tmp_path: Path, value: str) -> None:
    message = error(tmp_path, f"on_model_change = {value}\n")
    assert "on_model_change" in message
