"""Building a `StrategyCodeAgent` from its `[[agents]]` entry: the key from the environment, the
client, the schedule, the sandbox's limits and containment, and the prices.

This module owns the translation of a `StrategyCodeAgentConfig` into a wired agent
(`build_strategy_code_agent`), used by `openbell replay` and the live daemon, as `llm_agents.py`
is for LLM agents. The API key is read from the variable named by `api_key_env` (a missing or
empty variable is a one-line `ConfigError`; no `api_key_env` means no key, for a local server).
Whether the code runs jailed, and the redactor its errors are masked with, come from the run's
`Containment` (`sandboxing.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from openbell.agents.strategy_code.agent import StrategyCodeAgent, StrategySettings
from openbell.agents.strategy_code.sandbox import SandboxLimits
from openbell.ops.config.model_endpoints import endpoint_of
from openbell.ops.config.schema import StrategyCodeAgentConfig
from openbell.ops.wiring.sandboxing import Containment

if TYPE_CHECKING:
    from openbell.agents.llm.answers import AnswerBook


def build_strategy_code_agent(
    config: StrategyCodeAgentConfig,
    environ: Mapping[str, str],
    containment: Containment | None = None,
    answers: AnswerBook | None = None,
) -> StrategyCodeAgent:
    """The strategy-code agent of `config`, its key resolved from `environ`, contained as
    `containment` says (default: jailed, or a `ConfigError` where no jail can run); its writer
    answered from `answers` (no key, no endpoint) when given."""
    contain = containment if containment is not None else Containment()
    sandboxed = contain.sandboxed(config.name, "strategy_code")
    client, prices = endpoint_of(config, environ, answers)
    return StrategyCodeAgent(
        name=config.name,
        client=client,
        settings=StrategySettings(
            interval=config.interval,
            lookback=config.lookback,
            rewrite_every=config.rewrite_every,
            max_retries=config.max_retries,
            rebalance_band=config.rebalance_band,
            limits=SandboxLimits(
                cpu_s=config.cpu_s, memory_mb=config.memory_mb, wall_s=config.wall_s
            ),
            sandboxed=sandboxed,
        ),
        prices=prices,
        redactor=contain.redactor.with_secrets([client.config.api_key]),
    )
