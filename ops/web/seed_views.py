"""The arena page's groups of repeated runs: each agent's mean and interval over its seeds.

This module owns how a market's groups of repeated runs (`replay --seeds N`,
`ops.evaluation.seed_groups`) appear under its leaderboard on the arena page: one row per agent with
its mean composite, mean rank and mean cumulative return, each with the interval of the runs, and
the agent's P(beat) against each other agent of the group, written as the CLI's tables write them
(`ops.reports.figures`).
"""

from __future__ import annotations

from dataclasses import dataclass

from openbell.ops.evaluation.seed_groups import SeedGroup, SeedStat
from openbell.ops.reports import figures


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedAgentLine:
    """One agent of a group: its figures over the seeds, and P(beat) against each other agent."""

    agent: str
    composite: str
    rank: str
    cumulative_return: str
    p_beat: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedGroupView:
    """One group of repeated runs on the arena page."""

    label: str
    seeds: int
    confidence: str
    agents: tuple[str, ...]
    lines: tuple[SeedAgentLine, ...]


def _stat(key: str, stat: SeedStat) -> str:
    if stat.mean is None:
        return figures.MISSING
    shown = figures.figure(key, stat.mean)
    if stat.low is None or stat.high is None:
        return shown
    return f"{shown} [{figures.figure(key, stat.low)}, {figures.figure(key, stat.high)}]"


def seed_group_view(group: SeedGroup) -> SeedGroupView:
    """A group of repeated runs as the arena page shows it."""
    order = tuple(agent.base_agent for agent in group.agents)
    return SeedGroupView(
        label=group.group_label,
        seeds=len(group.seeds),
        confidence=f"{group.confidence:.0%}",
        agents=order,
        lines=tuple(
            SeedAgentLine(
                agent=agent.base_agent,
                composite=_stat("composite", agent.stats["composite"]),
                rank=_stat("rank", agent.stats["rank"]),
                cumulative_return=_stat("cumulative_return", agent.stats["cumulative_return"]),
                p_beat=tuple(
                    ""
                    if other == agent.base_agent
                    else f"{group.p_beat[agent.base_agent][other]:.2f}"
                    for other in order
                ),
            )
            for agent in group.agents
        ),
    )
