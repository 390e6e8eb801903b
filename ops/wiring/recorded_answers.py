"""`openbell replay --answers LEDGER [--swap-model NAME=MODEL]`: a re-run from recorded answers.

This module owns the wiring of a re-run. `load_answers` reads the recorded ledger's exchanges
and masking keys (`store.exchanges`) into an `AnswerBook`; `Answering` (`answering_of`) says which
LLM agents are answered from it (all but the swapped ones, and under `--seeds` each of their
runs); `parse_swap` reads a `--swap-model` value
(`NAME=MODEL`, or `NAME=MODEL@BASE_URL` for another endpoint) and `swapped_config` gives the config
whose agent NAME asks MODEL instead (its own prices dropped, so that `[prices."MODEL"]` prices
it). A season name in place of the ledger arrives with seasons: today `--answers` takes a ledger
(a SQLite file or a database URL).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from openbell.agents.llm.answers import AnswerBook
from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import LlmAgentConfig, OpenbellConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class Swap:
    """`--swap-model NAME=MODEL[@BASE_URL]`: agent `agent` asks `model` (at `base_url`: None,
    its own endpoint)."""

    agent: str
    model: str
    base_url: str | None = None

    def describe(self) -> str:
        """E.g. `agent llm-a swapped to model other-1 (at http://...)`."""
        where = "" if self.base_url is None else f" at {self.base_url}"
        return f"agent {self.agent} swapped to model {self.model}{where}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Answering:
    """A re-run's recorded answers and the agents that do not take them (the swapped ones)."""

    book: AnswerBook
    swapped: frozenset[str] = frozenset()

    def for_agent(self, name: str) -> AnswerBook | None:
        """The book agent `name` is answered from; None for a swapped agent (it asks its model,
        on the recorded masking keys all the same: `book.keys`)."""
        return None if name in self.swapped else self.book


def answering_of(book: AnswerBook, swaps: Sequence[Swap], seeds: int | None = None) -> Answering:
    """The re-run of `book` with `swaps`: under `--seeds N`, each run of a swapped agent
    (`NAME.seedK`) is swapped too."""
    from openbell.ops.wiring.seeds import run_name

    names = {swap.agent for swap in swaps}
    if seeds is not None:
        names |= {run_name(name, seed) for name in names for seed in range(1, seeds + 1)}
    return Answering(book=book, swapped=frozenset(names))


def ledger_url(ledger: str) -> str:
    """The store URL of `--answers`: a URL as given, a SQLite file (which must exist) as its."""
    from pathlib import Path

    if "://" in ledger:
        return ledger
    path = Path(ledger)
    if not path.is_file():
        raise ConfigError(f"--answers {ledger}: no such ledger file")
    return f"sqlite:///{path.as_posix()}"


def load_answers(ledger: str) -> AnswerBook:
    """The recorded exchanges and masking keys of `ledger`; `ConfigError` when it holds none."""
    from openbell.store.db import make_engine
    from openbell.store.exchanges import recorded_answers, recorded_keys

    url = ledger_url(ledger)
    engine = make_engine(url, read_only=True)
    try:
        answers = recorded_answers(engine)
        keys = recorded_keys(engine)
    finally:
        engine.dispose()
    if not answers:
        raise ConfigError(
            f"--answers {ledger}: the ledger holds no recorded model answer (recorded since "
            "store revision 0023)"
        )
    return AnswerBook(source=ledger, answers=answers, keys=keys)


def parse_swap(value: str) -> Swap:
    """`NAME=MODEL` or `NAME=MODEL@BASE_URL`; `ConfigError` for anything else."""
    agent, sep, rest = value.partition("=")
    model, at, base_url = rest.partition("@")
    if not sep or not agent.strip() or not model.strip() or (at and not base_url.strip()):
        raise ConfigError(
            f"--swap-model {value}: write NAME=MODEL (or NAME=MODEL@BASE_URL), e.g. "
            "llm-a=gpt-4o-mini"
        )
    return Swap(agent=agent.strip(), model=model.strip(), base_url=base_url.strip() or None)


def swapped_config(config: OpenbellConfig, swaps: Sequence[Swap]) -> OpenbellConfig:
    """`config` with each swapped LLM agent asking its new model (and endpoint). Raises
    `ConfigError` for an agent that is not an LLM agent of the config, or swapped twice."""
    by_name: Mapping[str, Swap] = {swap.agent: swap for swap in swaps}
    if len(by_name) != len(swaps):
        raise ConfigError("--swap-model: one agent swapped twice")
    llm = {agent.name for agent in config.agents if isinstance(agent, LlmAgentConfig)}
    unknown = sorted(set(by_name) - llm)
    if unknown:
        raise ConfigError(
            f"--swap-model: {', '.join(unknown)} is not an LLM agent of the config; LLM agents: "
            f"{', '.join(sorted(llm)) or 'none'}"
        )
    agents = []
    for agent in config.agents:
        swap = by_name.get(agent.name)
        if swap is None or not isinstance(agent, LlmAgentConfig):
            agents.append(agent)
            continue
        update: dict[str, object] = {
            "model": swap.model,
            "price_in_per_mtok": None,
            "price_out_per_mtok": None,
            "price_cached_per_mtok": None,
        }
        if swap.base_url is not None:
            update["base_url"] = swap.base_url
        agents.append(agent.model_copy(update=update))
    return config.model_copy(update={"agents": tuple(agents)})
