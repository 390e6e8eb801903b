"""The leaderboard's interval tables for people: groups of repeated runs and the bootstrap.

This module owns how `openbell leaderboard` shows, under a market's board, each group of repeated
runs (`replay --seeds N`: each agent's mean and interval over the seeds, then P(beat)) and, with
`--bootstrap DRAWS`, each account's bootstrap intervals and P(beat) (the P(beat) table up to
`MAX_BEAT_COLUMNS` accounts; past that, in the JSON only). Figures are rounded as the
leaderboard rounds them (`ops.reports.figures`); an interval is `[low, high]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from openbell.ops.reports import figures

if TYPE_CHECKING:
    from rich.table import Table

    from openbell.ops.reports.market_reports import Leaderboard

#: The metrics shown with an interval: (header, metric key).
SHOWN: tuple[tuple[str, str], ...] = (
    ("return %", "cumulative_return"),
    ("Sharpe", "sharpe_ratio"),
    ("Sortino", "sortino_ratio"),
    ("max DD %", "max_drawdown"),
    ("composite", "composite"),
    ("rank", "rank"),
)

#: The most accounts a P(beat) table shows (one column each); more are left to the JSON.
MAX_BEAT_COLUMNS = 8


def _span(key: str, low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return figures.MISSING
    return f"[{figures.figure(key, low)}, {figures.figure(key, high)}]"


def _beat_table(
    title: str, p_beat: Mapping[str, Mapping[str, float]], order: Sequence[str]
) -> Table:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column("P(row beats column)", justify="left")
    for name in order:
        table.add_column(name, justify="right", no_wrap=True)
    for a in order:
        table.add_row(a, *("" if a == b else f"{p_beat[a][b]:.2f}" for b in order))
    return table


def seed_group_tables(board: Leaderboard) -> list[Table]:
    """For each group of repeated runs: the agents' mean and interval over seeds, and P(beat)."""
    from rich.table import Table

    out: list[Table] = []
    for group in board.seed_groups:
        seeds = len(group.seeds)
        table = Table(
            title=(
                f"{board.market} seeds group {group.group_label}: mean over {seeds} seeds "
                f"[{group.confidence:.0%} interval of the runs]"
            ),
            title_justify="left",
        )
        table.add_column("agent", justify="left", overflow="fold")
        for header, _ in SHOWN:
            table.add_column(header, justify="right", no_wrap=True)
        for agent in group.agents:
            cells = []
            for _, key in SHOWN:
                stat = agent.stats[key]
                if stat.mean is None:
                    cells.append(figures.MISSING)
                else:
                    cells.append(
                        f"{figures.figure(key, stat.mean)} {_span(key, stat.low, stat.high)}"
                    )
            table.add_row(agent.base_agent, *cells)
        out.append(table)
        order = [agent.base_agent for agent in group.agents]
        out.append(_beat_table(f"P(beat) over the {seeds} seeds", group.p_beat, order))
    return out


def bootstrap_tables(board: Leaderboard) -> list[Table]:
    """The bootstrap intervals of each account, and P(beat); none without a bootstrap."""
    from rich.table import Table

    result = board.bootstrap
    if result is None:
        return []
    table = Table(
        title=(
            f"{board.market} bootstrap: {result.draws} draws, seed {result.seed}, "
            f"{result.periods} periods, mean block {result.block_length}, "
            f"{result.confidence:.0%} intervals"
        ),
        title_justify="left",
    )
    table.add_column("agent", justify="left", overflow="fold")
    for header, _ in SHOWN:
        table.add_column(header, justify="right", no_wrap=True)
    for found in result.accounts:
        table.add_row(
            found.name,
            *(_span(key, found.intervals[key].low, found.intervals[key].high) for _, key in SHOWN),
        )
    order = [found.name for found in result.accounts]
    if len(order) > MAX_BEAT_COLUMNS:
        table.caption = f"P(beat) of {len(order)} accounts: see --format json"
        table.caption_justify = "left"
        return [table]
    return [table, _beat_table(f"P(beat) over {result.draws} draws", result.p_beat, order)]
