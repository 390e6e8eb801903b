"""Running an experiment: its grid as one replay into the ledger, then its measures read back.

This module owns the wiring of `openbell experiment`: the grid's runs (`grid.expand`) replace the
config's agents and run as one replay of the experiment's market and window (`ops.wiring.planning`:
the same bars, the same slots and the same checks as `openbell replay`), recorded as one group of
repeated runs per cell (`store.seed_runs`, group `experiment START..END`, so `leaderboard` shows
each cell's mean over its seeds too); then `analyse` reads the runs' slot NAVs and panels from the
ledger (`ops.reports.market_reports.market_view`, as `leaderboard` computes them) and measures each
cell over its seeds and each comparison (`paired`). `analyse` alone measures an experiment already
run.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from sqlalchemy import Engine

from openbell.daemon.replay import ReplayReport
from openbell.ops.config.schema import OpenbellConfig
from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.ops.experiment.grid import Cell, Grid, experiment_config
from openbell.ops.experiment.paired import PairedDifference, paired_board, paired_difference
from openbell.ops.reports.market_reports import market_view
from openbell.store.db import make_engine
from openbell.store.seed_runs import SeedRun, record_seed_runs


@dataclass(frozen=True, slots=True, kw_only=True)
class CellSummary:
    """One cell over its seeds: each run's cumulative return and Sharpe (as the leaderboard's
    panel has them; None for a run without them), and their means and standard deviation."""

    cell: Cell
    returns: Mapping[int, float | None]
    sharpes: Mapping[int, float | None]
    mean_return: float | None
    std_return: float | None
    mean_sharpe: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentResult:
    """An experiment measured: its grid, each cell's summary and each comparison's difference."""

    grid: Grid
    group_label: str
    cells: tuple[CellSummary, ...]
    differences: tuple[tuple[str, PairedDifference], ...]


def group_label(grid: Grid) -> str:
    """The label of the experiment's group of runs in `store.seed_runs`."""
    settings = grid.settings
    return f"experiment {settings.start.isoformat()}..{settings.end.isoformat()}"


def run_experiment(
    config: OpenbellConfig, grid: Grid, *, resume: bool, show_progress: bool
) -> ReplayReport:
    """Replay the grid's runs into the config's ledger as one group (see the module docstring);
    errors as `ops.wiring.planning.replay_from_config`'s."""
    from openbell.ops.wiring.planning import replay_from_config

    settings = grid.settings
    report = replay_from_config(
        experiment_config(config, grid),
        start=settings.start,
        end=settings.end,
        market=settings.market,
        resume=resume,
        show_progress=show_progress,
    )
    engine = make_engine(config.store.url)
    try:
        label = group_label(grid)
        record_seed_runs(
            engine,
            [
                SeedRun(agent=grid.run_name(cell, seed), group_label=label,
                        base_agent=cell.name, seed=seed)
                for cell in grid.cells
                for seed in grid.seeds
            ],
        )  # fmt: skip
    finally:
        engine.dispose()
    return report


def analyse(engine: Engine, grid: Grid) -> ExperimentResult:
    """The experiment's measures, read from the ledger `engine` (see the module docstring)."""
    settings = grid.settings
    start_at = datetime.combine(settings.start, time(0), tzinfo=UTC)
    end_at = datetime.combine(settings.end + timedelta(days=1), time(0), tzinfo=UTC)
    view = market_view(engine, settings.market, start_at, end_at)
    curves = view.equity_curves()
    panels = {row.agent: row.panel for row in view.leaderboard.rows if row.agent is not None}
    cells = []
    runs: dict[str, dict[int, Sequence[NavPoint]]] = {}
    for cell in grid.cells:
        names = {seed: grid.run_name(cell, seed) for seed in grid.seeds}
        runs[cell.name] = {seed: curves[name] for seed, name in names.items() if name in curves}
        returns = {
            seed: None if name not in panels else panels[name].cumulative_return
            for seed, name in names.items()
        }
        sharpes = {
            seed: None if name not in panels else panels[name].sharpe_ratio
            for seed, name in names.items()
        }
        cells.append(
            CellSummary(
                cell=cell,
                returns=returns,
                sharpes=sharpes,
                mean_return=_mean(returns.values()),
                std_return=_std(returns.values()),
                mean_sharpe=_mean(sharpes.values()),
            )
        )
    found = [
        paired_difference(
            c.variant.name,
            c.reference.name,
            runs[c.variant.name],
            runs[c.reference.name],
            confidence=settings.confidence,
            draws=settings.draws,
            seed=settings.resample_seed,
        )
        for c in grid.comparisons
    ]
    adjusted = paired_board(found)
    return ExperimentResult(
        grid=grid,
        group_label=group_label(grid),
        cells=tuple(cells),
        differences=tuple((c.label, d) for c, d in zip(grid.comparisons, adjusted, strict=True)),
    )


def _kept(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _mean(values: Iterable[float | None]) -> float | None:
    kept = _kept(values)
    return statistics.fmean(kept) if kept else None


def _std(values: Iterable[float | None]) -> float | None:
    kept = _kept(values)
    return statistics.stdev(kept) if len(kept) > 1 else None
