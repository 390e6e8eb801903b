"""The model client and prices of an agent that asks a model on an OpenAI-compatible endpoint
once or a few times a cycle (`strategy_code`, `rating`), and of a judge (`[judges.NAME]`).

This module owns turning such an agent's endpoint keys into its `ChatClient` and its `Prices`
(`endpoint_of`). The API key is read from the variable named by `api_key_env` (a missing or empty
variable is a one-line `ConfigError`; no `api_key_env` means no key, for a local server); without
both per-million-token prices the cost is not computed.
"""

from __future__ import annotations

from collections.abc import Mapping

from openbell.agents.llm.answers import AnswerBook, RecordedTransport
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.recorder import Prices
from openbell.ops.config.schema import (
    JudgeConfig,
    RatingAgentConfig,
    RatingJudgeConfig,
    StrategyCodeAgentConfig,
    resolve_secret,
)


def endpoint_of(
    config: StrategyCodeAgentConfig | RatingAgentConfig | RatingJudgeConfig | JudgeConfig,
    environ: Mapping[str, str],
    answers: AnswerBook | None = None,
) -> tuple[ChatClient, Prices | None]:
    """The client of `config`'s model, its key resolved from `environ`, and its prices; with
    `answers`, a client answered from that record (`replay --answers`: no key, no endpoint)."""
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
        ),
        transport=None if answers is None else RecordedTransport(answers),
    )
    if config.price_in_per_mtok is None or config.price_out_per_mtok is None:
        return client, None
    return client, Prices(
        in_per_mtok=config.price_in_per_mtok,
        out_per_mtok=config.price_out_per_mtok,
        cached_per_mtok=config.price_cached_per_mtok,
    )
