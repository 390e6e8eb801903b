"""Repeated runs compared over their seeds: each agent's mean and spread, and who beats whom.

This module owns the summary of one group of repeated runs (`openbell replay --seeds N`, recorded
in `store.seed_runs`): every configured agent ran once per seed, as its own account. For each seed
the group's accounts of that seed are ranked among themselves by the StockBench composite
(`ops.evaluation.ranking.composite_rank`, the benchmark left out), so a seed's composite and rank
compare runs that saw the same seed. Then, for each agent, each metric of the panel, its composite
and its rank get, over the seeds where they are defined: the mean, the sample standard deviation
(ddof=1; None for one value) and the percentile interval of the seed values (the `(1 - confidence) /
2` and `(1 + confidence) / 2` quantiles with numpy's linear interpolation: the spread of a single
run's outcome, not a confidence interval of the mean). `p_beat[a][b]` is the share of the group's
seeds in which both agents are ranked and `a`'s composite is strictly above `b`'s. Pure: the
caller passes each run's panel.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from openbell.ops.evaluation.bootstrap import DEFAULT_CONFIDENCE, METRICS, PANEL_METRICS
from openbell.ops.evaluation.ranking import Entrant, composite_rank
from openbell.ops.evaluation.return_metrics import Panel
from openbell.store.seed_runs import SeedRun


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedRunPanel:
    """One run of a group: agent `base_agent` with `seed`, under account name `name`."""

    name: str
    base_agent: str
    seed: int
    panel: Panel


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedStat:
    """One metric of one agent over the seeds that define it (`runs` of them)."""

    mean: float | None
    std: float | None
    low: float | None
    high: float | None
    runs: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedAgent:
    """One agent of a group: its runs' names and each metric (`bootstrap.METRICS`) over seeds."""

    base_agent: str
    runs: tuple[str, ...]
    stats: Mapping[str, SeedStat]


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedGroup:
    """A group of repeated runs: its seeds, its agents by mean composite (best first), P(beat)."""

    group_label: str
    seeds: tuple[int, ...]
    confidence: float
    agents: tuple[SeedAgent, ...]
    p_beat: Mapping[str, Mapping[str, float]]


def seed_stat(values: Sequence[float | None], confidence: float) -> SeedStat:
    """Mean, sample standard deviation and percentile interval of the defined values."""
    kept = [value for value in values if value is not None]
    if not kept:
        return SeedStat(mean=None, std=None, low=None, high=None, runs=0)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(np.array(kept, dtype=np.float64), [tail, 1.0 - tail])
    return SeedStat(
        mean=statistics.fmean(kept),
        std=statistics.stdev(kept) if len(kept) > 1 else None,
        low=float(low),
        high=float(high),
        runs=len(kept),
    )


def summarise_group(
    group_label: str, runs: Sequence[SeedRunPanel], *, confidence: float = DEFAULT_CONFIDENCE
) -> SeedGroup:
    """The summary of one group's runs (see the module docstring)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    seeds = tuple(sorted({run.seed for run in runs}))
    bases = sorted({run.base_agent for run in runs})
    values: dict[str, dict[str, list[float | None]]] = {
        base: {metric: [] for metric in METRICS} for base in bases
    }
    names: dict[str, list[str]] = {base: [] for base in bases}
    composites: dict[int, dict[str, float | None]] = {}
    for seed in seeds:
        of_seed = {run.base_agent: run for run in runs if run.seed == seed}
        ranked = composite_rank(
            [Entrant(name=base, panel=run.panel) for base, run in sorted(of_seed.items())]
        )
        composites[seed] = {}
        for row in ranked:
            run = of_seed[row.name]
            names[row.name].append(run.name)
            found = values[row.name]
            for metric in PANEL_METRICS:
                found[metric].append(getattr(run.panel, metric))
            found["composite"].append(row.composite)
            found["rank"].append(None if row.rank is None else float(row.rank))
            composites[seed][row.name] = row.composite
    agents = [
        SeedAgent(
            base_agent=base,
            runs=tuple(names[base]),
            stats={metric: seed_stat(values[base][metric], confidence) for metric in METRICS},
        )
        for base in bases
    ]
    agents.sort(key=lambda agent: (-_or_low(agent.stats["composite"].mean), agent.base_agent))
    return SeedGroup(
        group_label=group_label,
        seeds=seeds,
        confidence=confidence,
        agents=tuple(agents),
        p_beat={a: {b: _p_beat(composites, a, b) for b in bases if b != a} for a in bases},
    )


def _or_low(value: float | None) -> float:
    return float("-inf") if value is None else value


def _p_beat(composites: Mapping[int, Mapping[str, float | None]], a: str, b: str) -> float:
    wins = 0
    for by_agent in composites.values():
        mine, theirs = by_agent.get(a), by_agent.get(b)
        if mine is not None and theirs is not None and mine > theirs:
            wins += 1
    return wins / len(composites) if composites else 0.0


def groups_for(
    runs: Sequence[SeedRun], panels: Mapping[str, Panel], *, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[SeedGroup, ...]:
    """The summary of each group with runs among `panels` (account name -> its panel in the
    leaderboard), by group label; runs of other markets (not in `panels`) are left out."""
    by_group: dict[str, list[SeedRunPanel]] = {}
    for run in runs:
        panel = panels.get(run.agent)
        if panel is None:
            continue
        by_group.setdefault(run.group_label, []).append(
            SeedRunPanel(name=run.agent, base_agent=run.base_agent, seed=run.seed, panel=panel)
        )
    return tuple(
        summarise_group(label, found, confidence=confidence)
        for label, found in sorted(by_group.items())
    )
