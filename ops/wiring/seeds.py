"""Repeated runs of a replay: the same agents run once per seed, as one group (`--seeds N`).

This module owns what `openbell replay --seeds N` changes in a replay. Every configured agent
runs N times, seed K = 1..N, each run as its own agent named `NAME.seedK` (its own accounts,
cycles and traces, so `report`, `trace` and `positions` work on one run as on any agent). What
the seed changes: the random and factor-model baselines use seed `seed + K` (their configured
`seed` plus K); an LLM agent sends `"seed": K` in its request body (plus its configured
`extra_body` seed, if any) at its configured `temperature` (at temperature 0 an endpoint may
answer every seed alike: give a temperature above 0 for runs that differ); every other agent
runs unchanged (a deterministic baseline gives N equal runs, a fixed reference in the group).
Once the replay has created the agents, each run is recorded in the ledger (`store.seed_runs`)
with its agent, its seed and the group's label, `START..END xN` (the replay's window and seed
count), and the leaderboard compares the agents over their seeds (`ops.evaluation.seed_groups`).
"""

from __future__ import annotations

from datetime import date

from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import (
    AnyAgentConfig,
    FactorModelAgentConfig,
    LlmAgentConfig,
    OpenbellConfig,
    RandomAgentConfig,
)
from openbell.store.db import make_engine
from openbell.store.seed_runs import SeedRun, record_seed_runs

#: The most runs one `--seeds` replay makes of each agent.
MAX_SEEDS = 100


def run_name(agent: str, seed: int) -> str:
    """The name of `agent`'s run with `seed`."""
    return f"{agent}.seed{seed}"


def group_label(start: date, end: date, seeds: int) -> str:
    """The label of the group of a replay from `start` through `end` with `seeds` runs."""
    return f"{start.isoformat()}..{end.isoformat()} x{seeds}"


def _check(seeds: int) -> None:
    if not 1 <= seeds <= MAX_SEEDS:
        raise ConfigError(f"--seeds must be within 1..{MAX_SEEDS}, got {seeds}")


def seeded_agent(agent: AnyAgentConfig, seed: int) -> AnyAgentConfig:
    """`agent`'s run with `seed` (see the module docstring)."""
    update: dict[str, object] = {"name": run_name(agent.name, seed)}
    if isinstance(agent, RandomAgentConfig | FactorModelAgentConfig):
        update["seed"] = agent.seed + seed
    elif isinstance(agent, LlmAgentConfig):
        configured = agent.extra_body.get("seed", 0)
        base = configured if isinstance(configured, int) else 0
        update["extra_body"] = {**agent.extra_body, "seed": base + seed}
    return agent.model_copy(update=update)


def seeded_config(config: OpenbellConfig, seeds: int) -> OpenbellConfig:
    """`config` with each agent replaced by its `seeds` runs (seed 1 first)."""
    _check(seeds)
    agents = tuple(
        seeded_agent(agent, seed) for agent in config.agents for seed in range(1, seeds + 1)
    )
    return config.model_copy(update={"agents": agents})


def seed_runs_of(config: OpenbellConfig, seeds: int, label: str) -> list[SeedRun]:
    """The runs of `config`'s agents with `seeds`, in group `label`."""
    _check(seeds)
    return [
        SeedRun(
            agent=run_name(agent.name, seed), group_label=label, base_agent=agent.name, seed=seed
        )
        for agent in config.agents
        for seed in range(1, seeds + 1)
    ]


def record_group(config: OpenbellConfig, seeds: int, *, start: date, end: date) -> int:
    """Record the runs of a `--seeds` replay in the config's ledger; how many were new."""
    engine = make_engine(config.store.url)
    try:
        return record_seed_runs(engine, seed_runs_of(config, seeds, group_label(start, end, seeds)))
    finally:
        engine.dispose()
