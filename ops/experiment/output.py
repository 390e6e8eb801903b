"""An experiment's measures for people and for programs: rich tables and one JSON record.

This module owns how `openbell experiment` shows what `measure.analyse` measured: a table of the
cells (each one's mean cumulative return and Sharpe over its seeds) and a table of the paired
differences (each comparison's mean per-slot return difference in basis points, its interval,
the mean difference of cumulative return over the seeds, the seeds the variant won, the
permutation p-values and the verdict: `paired.PairedDifference.distinguishable`), and the same
as a JSON record. What the tables print of names is agent names (letters, digits, `.`, `_`, `-`),
prompt labels (file stems reduced to letters, digits, `_`, `-`) and mode names: nothing rich
could read as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openbell.ops.experiment.measure import ExperimentResult
from openbell.ops.experiment.paired import PairedDifference
from openbell.ops.reports import figures

if TYPE_CHECKING:
    from rich.table import Table

#: Basis points in a fraction.
BPS = 10_000


def verdict(found: PairedDifference) -> str:
    """The comparison in words: distinguishable from zero (which way), or not."""
    if found.low is None:
        return "too few slots"
    if not found.distinguishable:
        return "not distinguishable from 0"
    return "variant better" if found.low > 0 else "variant worse"


def experiment_record(result: ExperimentResult) -> dict[str, Any]:
    """The experiment's measures as one JSON-ready record."""
    settings = result.grid.settings
    cells = {cell.cell.name: cell for cell in result.cells}
    return {
        "market": settings.market,
        "start": settings.start.isoformat(),
        "end": settings.end.isoformat(),
        "group_label": result.group_label,
        "seeds": list(result.grid.seeds),
        "axes": {
            "model": list(settings.models),
            "prompt": [result.grid.prompt_labels[p] for p in settings.prompts],
            "mode": sorted({cell.mode for cell in result.grid.cells}),
        },
        "prompts": dict(result.grid.prompt_labels),
        "confidence": settings.confidence,
        "draws": settings.draws,
        "resample_seed": settings.resample_seed,
        "interval": "stationary bootstrap of slots, every seed's pair moving with its slot",
        "verdict_rule": "distinguishable: the interval excludes 0 and p_value <= 1 - confidence",
        "cells": [
            {
                "cell": found.cell.name,
                "model": found.cell.model,
                "prompt": found.cell.prompt,
                "mode": found.cell.mode,
                "runs": {
                    str(seed): result.grid.run_name(found.cell, seed) for seed in result.grid.seeds
                },
                "cumulative_returns": {str(k): v for k, v in found.returns.items()},
                "sharpe_ratios": {str(k): v for k, v in found.sharpes.items()},
                "mean_cumulative_return": found.mean_return,
                "std_cumulative_return": found.std_return,
                "mean_sharpe_ratio": found.mean_sharpe,
            }
            for found in cells.values()
        ],
        "differences": [
            _difference_record(label, found, result) for label, found in result.differences
        ],
    }


def _difference_record(
    label: str, found: PairedDifference, result: ExperimentResult
) -> dict[str, Any]:
    comparison = next(c for c in result.grid.comparisons if c.variant.name == found.variant
                      and c.reference.name == found.reference)  # fmt: skip
    return {
        "comparison": label,
        "axis": comparison.axis,
        "held": comparison.held,
        "variant": found.variant,
        "reference": found.reference,
        "seeds": list(found.seeds),
        "periods": found.periods,
        "block_length": found.block_length,
        "mean_slot_return_difference": found.mean_difference,
        "low": found.low,
        "high": found.high,
        "confidence": found.confidence,
        "distinguishable": found.distinguishable,
        "verdict": verdict(found),
        "p_value": found.p_value,
        "adjusted_p_value": found.adjusted_p_value,
        "cumulative_return_differences": {
            str(seed): value for seed, value in found.return_differences.items()
        },
        "mean_cumulative_return_difference": found.mean_return_difference,
        "wins": found.wins,
    }


def _bps(value: float | None) -> str:
    return figures.places(None if value is None else value * BPS, 2)


def experiment_tables(result: ExperimentResult) -> list[Table]:
    """The cells' table and the differences' table."""
    from rich.table import Table

    settings = result.grid.settings
    seeds = len(result.grid.seeds)
    cells = Table(
        title=(
            f"experiment {settings.market} {settings.start}..{settings.end}: "
            f"{len(result.cells)} cells x {seeds} seeds, one replay ({result.group_label})"
        ),
        title_justify="left",
        caption="mean over the seeds; Sharpe as the leaderboard's (annualised)",
        caption_justify="left",
    )
    for header in ("cell", "model", "prompt", "mode", "runs"):
        cells.add_column(header, justify="left" if header != "runs" else "right")
    for header in ("return %", "sd %", "Sharpe"):
        cells.add_column(header, justify="right", no_wrap=True)
    for summary in result.cells:
        runs = sum(1 for value in summary.returns.values() if value is not None)
        cells.add_row(
            summary.cell.name, summary.cell.model, summary.cell.prompt, summary.cell.mode,
            str(runs), figures.percent(summary.mean_return), figures.percent(summary.std_return),
            figures.places(summary.mean_sharpe, 2),
        )  # fmt: skip
    level = f"{settings.confidence:.0%}"
    alpha = 1.0 - settings.confidence
    differences = Table(
        title="paired differences: variant - reference, same seed, same slots",
        title_justify="left",
        caption=(
            f"diff/slot: mean per-slot return difference in bps over seeds and slots, {level} "
            "stationary-bootstrap interval of the slots (each seed's pair moving with its slot); "
            "return diff: mean over the seeds of the cumulative return difference; wins: seeds "
            "the variant ended above; p: two-sided sign-flip test, adj. p: Holm across the "
            f"comparisons; distinguishable: the interval excludes 0 and p <= {alpha:.2g} "
            "(docs/guide/experiment.md)"
        ),
        caption_justify="left",
    )
    for header in ("comparison", "held", "variant", "reference"):
        differences.add_column(header, justify="left")
    for header in ("diff/slot bps", f"{level} low", f"{level} high", "return diff %", "wins",
                   "p", "adj. p"):  # fmt: skip
        differences.add_column(header, justify="right", no_wrap=True)
    differences.add_column("verdict", justify="left")
    comparisons = {(c.variant.name, c.reference.name): c for c in result.grid.comparisons}
    for label, found in result.differences:
        held = comparisons[(found.variant, found.reference)].held
        differences.add_row(
            label, ", ".join(f"{k} {v}" for k, v in held.items()), found.variant, found.reference,
            _bps(found.mean_difference), _bps(found.low), _bps(found.high),
            figures.percent(found.mean_return_difference), f"{found.wins}/{len(found.seeds)}",
            figures.places(found.p_value, 4), figures.places(found.adjusted_p_value, 4),
            verdict(found),
        )  # fmt: skip
    return [cells, differences]
