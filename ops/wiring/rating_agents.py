"""Building a `RatingAgent` from its `[[agents]]` entry: the key from the environment, the
client, the rule's parameters, the prices and the judge of its Market Insights reports.

This module owns the translation of a `RatingAgentConfig` into a wired agent
(`build_rating_agent`), used by `openbell replay` and the live daemon, as `strategy_agents.py` is
for strategy-code agents. The API key is read from the variable named by `api_key_env` (a missing
or empty variable is a one-line `ConfigError`; no `api_key_env` means no key, for a local server),
the judge's from its own `api_key_env`.
"""

from __future__ import annotations

from collections.abc import Mapping

from openbell.agents.llm.answers import AnswerBook
from openbell.agents.rating.agent import RatingAgent, RatingSettings
from openbell.agents.rating.quality_judge import ReportJudge
from openbell.markets.errors import ConfigError
from openbell.ops.config.model_endpoints import endpoint_of
from openbell.ops.config.schema import RatingAgentConfig


def build_rating_agent(
    config: RatingAgentConfig, environ: Mapping[str, str], answers: AnswerBook | None = None
) -> RatingAgent:
    """The rating agent of `config`, its key resolved from `environ`; answered from `answers`
    (no key, no endpoint) when given. Its judge's exchanges are not recorded: a re-run asks it."""
    client, prices = endpoint_of(config, environ, answers)
    if isinstance(config.judge, str):  # `OpenbellConfig.resolved` gives the table it names
        raise ConfigError(f"judge {config.judge!r} of agent {config.name!r} is not resolved")
    judge = None if config.judge is None else ReportJudge(endpoint_of(config.judge, environ)[0])
    return RatingAgent(
        name=config.name,
        client=client,
        settings=RatingSettings(
            interval=config.interval,
            lookback=config.lookback,
            max_retries=config.max_retries,
            max_weight=config.max_weight,
            rebalance_band=config.rebalance_band,
            insights=config.report == "insights",
        ),
        prices=prices,
        judge=judge,
    )
