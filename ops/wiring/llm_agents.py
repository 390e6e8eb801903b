"""Building an `LlmAgent` from its `[[agents]]` entry: the key from the environment, the client,
the budgets, the prices, and the decision mode's prompt and masking.

This module owns the translation of an `LlmAgentConfig` into a wired agent (`build_llm_agent`),
used by `openbell replay` (and the live daemon). The API key is read from the variable named by
`api_key_env` (a missing or empty variable is a one-line `ConfigError`; no `api_key_env` means no
key, for a local server). Each cycle gets a fresh prompt builder of the entry's decision mode and
its account's masker; both use the entry's `masking_seed` and `rebase_prices`, and the account's
stored masking key, so the prompts show what the tool results show and the structured modes read
the model's stock ids back through the same alias map. Given an `AnswerBook` (`openbell replay
--answers`), the agent asks no endpoint and needs no key: its client answers from the book
(`agents.llm.answers.RecordedTransport`) and its accounts take the recorded masking keys.
"""

from __future__ import annotations

from collections.abc import Mapping

from openbell.agents.aliases import seed_of
from openbell.agents.llm.agent import LlmAgent, MaskerFactory, PromptFactory
from openbell.agents.llm.answers import AnswerBook, RecordedTransport
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.hooks import PromptBuilder
from openbell.agents.llm.recorder import Prices
from openbell.agents.llm.run import Budgets
from openbell.agents.llm.spend_caps import SpendCaps
from openbell.agents.masking import masker_for
from openbell.agents.modes import DEFAULT_RESEARCH_CALLS, prompt_for_mode
from openbell.agents.protocol import DecisionContext
from openbell.ops.config.schema import LlmAgentConfig, resolve_secret
from openbell.store.masking_keys import MaskingKey


def build_llm_agent(
    config: LlmAgentConfig,
    environ: Mapping[str, str],
    answers: AnswerBook | None = None,
    recorded_keys: Mapping[tuple[str, str], MaskingKey] | None = None,
) -> LlmAgent:
    """The LLM agent of `config`, its key resolved from `environ`; answered from `answers`
    (no key, no endpoint) when given; its accounts given the `recorded_keys` (by agent and
    market) when they have no masking key yet (a re-run, swapped agents included)."""
    api_key = (
        None
        if config.api_key_env is None or answers is not None
        else resolve_secret(config.api_key_env, environ)
    )
    client = ChatClient(
        ClientConfig(
            base_url=config.base_url,
            model=config.model,
            api_key=api_key,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            extra_headers=dict(config.extra_headers),
            extra_body=dict(config.extra_body),
        ),
        transport=None if answers is None else RecordedTransport(answers),
    )
    return LlmAgent(
        name=config.name,
        client=client,
        budgets=Budgets(
            max_turns=config.max_turns,
            max_tool_calls=config.max_tool_calls,
            max_tokens=config.max_tokens_per_cycle,
            max_wall_s=config.max_wall_s,
        ),
        prices=prices_of(config),
        caps=SpendCaps(per_day=config.max_usd_per_day, per_season=config.max_usd_per_season),
        prompt=prompt_factory(config),
        masker=masker_factory(config),
        instructions=config.instructions,
        recorded_keys=recorded_keys,
        on_model_change=config.on_model_change,
    )


def prices_of(config: LlmAgentConfig) -> Prices | None:
    """The model's prices from the entry, or None when it has none."""
    if config.price_in_per_mtok is None or config.price_out_per_mtok is None:
        return None
    return Prices(
        in_per_mtok=config.price_in_per_mtok,
        out_per_mtok=config.price_out_per_mtok,
        cached_per_mtok=config.price_cached_per_mtok,
    )


def prompt_factory(config: LlmAgentConfig) -> PromptFactory:
    """The prompt builder of the entry's decision mode, fresh for every cycle."""

    research_calls = (
        DEFAULT_RESEARCH_CALLS if config.research_calls is None else config.research_calls
    )

    def build(ctx: DecisionContext) -> PromptBuilder:
        return prompt_for_mode(
            config.mode,
            masking=config.masking,
            masking_seed=seed_of(config.masking_seed),
            rebase=config.rebase_prices,
            pairs=config.pairs,
            research_calls=research_calls,
            hedge_assets=config.hedge_candidates,
            hedge_leg_weight=config.hedge_leg_weight,
            without=config.without,
        )

    return build


def masker_factory(config: LlmAgentConfig) -> MaskerFactory:
    """The masker of the entry's masking level: each cycle's is its account's alias map."""
    return masker_for(
        config.masking, seed=seed_of(config.masking_seed), rebase=config.rebase_prices
    )
