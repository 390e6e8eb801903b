"""Which agents are the seeds' runs of a group of repeated runs, written and read.

This module owns the `seed_run` table: `openbell replay --seeds N` runs every configured agent
once per seed under its own name (`BASE.seedK`), and records here that the agent is seed K of
BASE in the replay's group, so the leaderboard can compare the agents over their seeds.
Recording is idempotent: an agent already recorded keeps its row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, insert, inspect, select

from openbell.store.core_tables import AGENT_TABLE, SEED_RUN_TABLE


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedRun:
    """Agent `agent` is the run of `base_agent` with `seed`, in group `group_label`."""

    agent: str
    group_label: str
    base_agent: str
    seed: int


def record_seed_runs(engine: Engine, runs: Sequence[SeedRun]) -> int:
    """Record `runs` whose agent exists in the ledger and is not recorded yet; how many were."""
    if not runs:
        return 0
    by_name = {run.agent: run for run in runs}
    with engine.begin() as connection:
        ids: dict[str, int] = {
            name: agent_id
            for name, agent_id in connection.execute(
                select(AGENT_TABLE.c.name, AGENT_TABLE.c.id).where(
                    AGENT_TABLE.c.name.in_(list(by_name))
                )
            )
            if agent_id is not None
        }
        known = set(
            connection.execute(
                select(SEED_RUN_TABLE.c.agent_id).where(
                    SEED_RUN_TABLE.c.agent_id.in_(list(ids.values()))
                )
            ).scalars()
        )
        fresh = [
            {
                "agent_id": agent_id,
                "group_label": by_name[name].group_label,
                "base_agent": by_name[name].base_agent,
                "seed": by_name[name].seed,
            }
            for name, agent_id in ids.items()
            if agent_id not in known
        ]
        if fresh:
            connection.execute(insert(SEED_RUN_TABLE), fresh)
    return len(fresh)


def seed_runs(engine: Engine) -> list[SeedRun]:
    """Every recorded seed run, by group, base agent and seed; none in a ledger whose schema
    predates the table (migration 0013), which a read-only reader cannot upgrade."""
    if not inspect(engine).has_table(SEED_RUN_TABLE.name):
        return []
    agent, seed_run = AGENT_TABLE.c, SEED_RUN_TABLE.c
    statement = (
        select(agent.name, seed_run.group_label, seed_run.base_agent, seed_run.seed)
        .join_from(SEED_RUN_TABLE, AGENT_TABLE, agent.id == seed_run.agent_id)
        .order_by(seed_run.group_label, seed_run.base_agent, seed_run.seed)
    )
    with engine.connect() as connection:
        return [
            SeedRun(agent=name, group_label=group, base_agent=base, seed=seed)
            for name, group, base, seed in connection.execute(statement)
        ]
