"""The records of a leaderboard's intervals: its groups of repeated runs and its bootstrap.

This module owns the JSON shapes of `ops.evaluation.seed_groups` and `ops.evaluation.bootstrap`
results as `openbell leaderboard --format json` and `GET /api/v1/leaderboard/{market}` write them
(keys `seed_groups` and `bootstrap` of a leaderboard record; `ops.web.schemas` describes them).
Statistics are JSON numbers, `null` where undefined; metrics are keyed by `bootstrap.METRICS`.
"""

from __future__ import annotations

from typing import Any

from openbell.ops.evaluation.bootstrap import METRICS, BootstrapResult
from openbell.ops.evaluation.seed_groups import SeedGroup


def seed_group_record(group: SeedGroup) -> dict[str, Any]:
    """One group of repeated runs: its seeds, each agent's statistics over them, and P(beat)."""
    return {
        "group_label": group.group_label,
        "seeds": list(group.seeds),
        "confidence": group.confidence,
        "agents": [
            {
                "agent": agent.base_agent,
                "runs": list(agent.runs),
                "metrics": {
                    metric: {
                        "mean": stat.mean,
                        "std": stat.std,
                        "low": stat.low,
                        "high": stat.high,
                        "runs": stat.runs,
                    }
                    for metric in METRICS
                    for stat in (agent.stats[metric],)
                },
            }
            for agent in group.agents
        ],
        "p_beat": {a: dict(beaten) for a, beaten in group.p_beat.items()},
    }


def bootstrap_record(result: BootstrapResult | None) -> dict[str, Any] | None:
    """A leaderboard's bootstrap: its settings, each account's intervals, P(beat); or None."""
    if result is None:
        return None
    return {
        "draws": result.draws,
        "seed": result.seed,
        "confidence": result.confidence,
        "periods": result.periods,
        "block_length": result.block_length,
        "rows": [
            {
                "name": found.name,
                "intervals": {
                    metric: {"low": i.low, "high": i.high, "defined": i.defined}
                    for metric in METRICS
                    for i in (found.intervals[metric],)
                },
            }
            for found in result.accounts
        ],
        "p_beat": {a: dict(beaten) for a, beaten in result.p_beat.items()},
    }
