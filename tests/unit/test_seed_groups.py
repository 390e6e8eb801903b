"""Repeated runs compared over their seeds: means, spreads and P(beat) worked out by hand."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

import pytest

from openbell.ops.evaluation.return_metrics import Panel
from openbell.ops.evaluation.seed_groups import SeedRunPanel, groups_for, seed_stat, summarise_group
from openbell.store.seed_runs import SeedRun

BLANK = Panel(
    periods=10,
    periods_per_year=252.0,
    start_at=None,
    end_at=None,
    cumulative_return=0.0,
    annual_return=0.0,
    annual_volatility=0.1,
    sharpe_ratio=0.0,
    sortino_ratio=None,
    max_drawdown=-0.1,
    calmar_ratio=None,
    excess_return=None,
    information_ratio=None,
)


def run(base: str, seed: int, **panel: Any) -> SeedRunPanel:
    return SeedRunPanel(
        name=f"{base}.seed{seed}",
        base_agent=base,
        seed=seed,
        panel=dataclasses.replace(BLANK, **panel),
    )


def test_seed_stat_is_mean_std_and_percentile_interval() -> None:
    found = seed_stat([0.1, None, 0.3, 0.2], 0.5)
    assert found.runs == 3
    assert found.mean == pytest.approx(0.2)
    assert found.std == pytest.approx(statistics.stdev([0.1, 0.2, 0.3]))
    assert found.low == pytest.approx(0.15)  # the 25 % quantile of 0.1, 0.2, 0.3
    assert found.high == pytest.approx(0.25)
    single = seed_stat([0.4], 0.95)
    assert (single.mean, single.std, single.low, single.high) == (0.4, None, 0.4, 0.4)
    assert seed_stat([None], 0.95).mean is None


def test_each_seed_is_ranked_on_its_own_and_p_beat_counts_seeds() -> None:
    # seed 1: a beats b on return and drawdown; seed 2: b beats a; seed 3: a again
    runs = [
        run("a", 1, cumulative_return=0.10, max_drawdown=-0.05),
        run("b", 1, cumulative_return=0.02, max_drawdown=-0.10),
        run("a", 2, cumulative_return=-0.03, max_drawdown=-0.12),
        run("b", 2, cumulative_return=0.04, max_drawdown=-0.02),
        run("a", 3, cumulative_return=0.06, max_drawdown=-0.04),
        run("b", 3, cumulative_return=0.01, max_drawdown=-0.09),
    ]
    group = summarise_group("g", runs, confidence=0.9)
    assert group.seeds == (1, 2, 3)
    assert group.p_beat == {"a": {"b": pytest.approx(2 / 3)}, "b": {"a": pytest.approx(1 / 3)}}
    by_agent = {agent.base_agent: agent for agent in group.agents}
    # two entrants: z-scores are +-1/sqrt(2) on each of return and drawdown, Sortino 0
    z = 1 / 2**0.5
    winner = (z + z + 0) / 3
    assert by_agent["a"].stats["composite"].mean == pytest.approx((winner - winner + winner) / 3)
    assert by_agent["a"].stats["rank"].mean == pytest.approx((1 + 2 + 1) / 3)
    assert by_agent["b"].stats["rank"].mean == pytest.approx((2 + 1 + 2) / 3)
    assert by_agent["a"].stats["cumulative_return"].mean == pytest.approx(0.13 / 3)
    assert by_agent["a"].runs == ("a.seed1", "a.seed2", "a.seed3")
    assert [agent.base_agent for agent in group.agents] == ["a", "b"]


def test_groups_for_keeps_the_runs_of_the_board() -> None:
    runs = [
        SeedRun(agent="a.seed1", group_label="g", base_agent="a", seed=1),
        SeedRun(agent="a.seed2", group_label="g", base_agent="a", seed=2),
        SeedRun(agent="z.seed1", group_label="other", base_agent="z", seed=1),
    ]
    panels = {"a.seed1": BLANK, "a.seed2": BLANK, "not-a-run": BLANK}
    (group,) = groups_for(runs, panels)
    assert group.group_label == "g"
    assert group.seeds == (1, 2)
    assert [agent.base_agent for agent in group.agents] == ["a"]
