"""Market Insights in `openbell report`: each rating agent's report quality, the return of its
ratings, and Herculean's regression of the one on the other across the market's rating agents.

This module owns `insights_record`, which `openbell report AGENT` adds for an account of kind
`rating`. A unit is one (rating agent, symbol) pair over the window, as Herculean's
configuration-asset pair:

- **Return** (`rating_return_by_symbol`): the cumulative return of the committed ratings, as the
  paper evaluates Market Insights "as in Trading": each step's rating exposure (strong buy 1,
  buy 0.5, hold 0, sell -0.5, strong sell -1; 0 at a step without a report) times the symbol's
  return from the step's slot to the next step's, compounded: `prod(1 + w_t r_t) - 1`. The return
  is priced as the benchmark is (`ops.evaluation.benchmark.carried_prices`: at a daily cadence, open
  to open, the paper's market-based return). The last step has no next slot and adds nothing.
- **Quality** (`report_quality_by_symbol`): `Q = (1 / 3K) sum_k sum_d q_d`, the mean over the
  report steps of the mean of the judge's three dimension scores (`agents.rating.quality_judge`),
  a step whose cycle stored no report scoring 0 (the paper's "a missing report scores 0"). A report
  the judge gave no verdict on (it failed) is left out, not scored 0: the judge's failure is not the
  agent's. A unit with no verdict at all has no quality and is left out of the regression.
  `report_quality` is the mean over the agent's symbols.
- **Runs**: agents that are seeds of one configured agent (`openbell replay --seeds N`,
  `store.seed_runs`) are averaged into one unit per symbol (the paper's run-averaged score and
  return).
- **Regression** (`quality_return_*`): Herculean's OLS of the return on the quality over every
  unit of the market's rating agents, with asset (symbol) and backbone (the rater's model, stored
  in its `ratings` rows) fixed effects (`ops.evaluation.stats.ols`): the slope, its standard error,
  t statistic and two-sided p-value, R^2, the units and the residual degrees of freedom. The paper
  has architecture fixed effects too; every openbell rating agent runs the same code, so there is
  no architecture to vary. Without controls: Spearman's rho of quality and return, with the
  p-value of its t approximation (`t = rho sqrt((n - 2) / (1 - rho^2))`, n - 2 degrees of freedom,
  as `scipy.stats.spearmanr`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine

from openbell.agents.kinds import RATING_KIND, RATINGS_TOOL
from openbell.agents.rating.quality_judge import QUALITY_TOOL, stored_verdict
from openbell.agents.rating.report import Rating, stored_model, stored_report
from openbell.markets.replay_source import ReplaySource
from openbell.ops.evaluation.benchmark import carried_prices, report_sources
from openbell.ops.evaluation.stats import Regression, ols, spearman, t_two_sided_p
from openbell.store import queries
from openbell.store.rating_reports import rating_reports_of, tool_results_of, window_cycles_of
from openbell.store.seed_runs import seed_runs

#: The backbone of an agent whose `ratings` rows name no model (written before they did).
UNKNOWN_MODEL = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class Unit:
    """One (configuration, symbol) unit: its quality (None without a verdict), the return of its
    ratings, and the levels of its fixed effects."""

    configuration: str
    symbol: str
    model: str
    quality: float | None
    rating_return: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Steps:
    """An account's steps in the window: each cycle's slot, ratings (None without a report) and
    verdicts' qualities per symbol (None for a verdict with an error)."""

    slots: tuple[datetime, ...]
    ratings: tuple[Mapping[str, Rating] | None, ...]
    qualities: tuple[Mapping[str, Decimal | None], ...]
    model: str


def _steps(
    engine: Engine, ids: Sequence[int], window: tuple[datetime | None, datetime | None]
) -> dict[int, _Steps]:
    cycles = window_cycles_of(engine, ids, *window)
    reports = rating_reports_of(engine, ids, RATINGS_TOOL, *window)
    verdicts = tool_results_of(engine, ids, QUALITY_TOOL, *window)
    out: dict[int, _Steps] = {}
    for account_id in ids:
        stored = {report.cycle_id: report.text for report in reports[account_id]}
        models = Counter(
            model for text in stored.values() if (model := stored_model(text)) is not None
        )
        judged = verdicts[account_id]
        out[account_id] = _Steps(
            slots=tuple(slot_at for _, slot_at in cycles[account_id]),
            ratings=tuple(
                None
                if cycle_id not in stored
                else {rating.symbol: rating.rating for rating, _ in stored_report(stored[cycle_id])}
                for cycle_id, _ in cycles[account_id]
            ),
            qualities=tuple(
                {
                    found.symbol: found.quality
                    for found in (stored_verdict(text) for text in judged.get(cycle_id, ()))
                }
                for cycle_id, _ in cycles[account_id]
            ),
            model=models.most_common(1)[0][0] if models else UNKNOWN_MODEL,
        )
    return out


def unit_quality(steps: _Steps, symbol: str) -> float | None:
    """`Q` of one symbol over the steps (module docstring); None without any verdict."""
    scores: list[Decimal] = []
    judged = False
    for rated, qualities in zip(steps.ratings, steps.qualities, strict=True):
        if rated is None:
            scores.append(Decimal(0))
            continue
        if symbol not in rated or symbol not in qualities:
            continue
        quality = qualities[symbol]
        if quality is not None:
            judged = True
            scores.append(quality)
    if not judged:
        return None
    return float(sum(scores, Decimal(0)) / len(scores))


def unit_return(
    steps: _Steps, symbol: str, prices: Mapping[datetime, Decimal | None]
) -> float | None:
    """The cumulative return of the symbol's ratings over the steps (module docstring); None
    when no step has a priced next return."""
    wealth = Decimal(1)
    priced = False
    for index, rated in enumerate(steps.ratings[:-1]):
        now, then = prices.get(steps.slots[index]), prices.get(steps.slots[index + 1])
        if now is None or then is None or now <= 0:
            continue
        priced = True
        found = None if rated is None else rated.get(symbol)
        exposure = found.exposure if found is not None else Decimal(0)
        wealth *= 1 + exposure * (then / now - 1)
    return float(wealth - 1) if priced else None


def units_of(
    engine: Engine,
    market: str,
    window: tuple[datetime | None, datetime | None],
    source: ReplaySource | None = None,
) -> dict[str, list[Unit]]:
    """Every rating agent's units in `market` over the window, by agent name (a seed's units are
    its configuration's, averaged over the runs: see `run_averaged`)."""
    accounts = [a for a in queries.accounts(engine, market) if a.agent_kind == RATING_KIND]
    if not accounts:
        return {}
    steps = _steps(engine, [a.account_id for a in accounts], window)
    stamps = sorted({slot for found in steps.values() for slot in found.slots})
    symbols = sorted(
        {symbol for found in steps.values() for rated in found.ratings if rated for symbol in rated}
    )
    sources = report_sources(engine, market, stamps, source, symbols)
    prices = {
        symbol: dict(zip(stamps, carried_prices(sources, symbol, stamps), strict=True))
        for symbol in (symbols if sources else ())
    }
    configured = {run.agent: run.base_agent for run in seed_runs(engine)}
    out: dict[str, list[Unit]] = {}
    for account in accounts:
        found = steps[account.account_id]
        rated = sorted({symbol for one in found.ratings if one for symbol in one})
        out[account.agent_name] = [
            Unit(
                configuration=configured.get(account.agent_name, account.agent_name),
                symbol=symbol,
                model=found.model,
                quality=unit_quality(found, symbol),
                rating_return=unit_return(found, symbol, prices.get(symbol, {})),
            )
            for symbol in rated
        ]
    return out


def run_averaged(units: Sequence[Unit]) -> list[Unit]:
    """One unit per (configuration, symbol): the mean quality and return over its runs that
    have both (a run without them is left out; a unit with no such run is dropped)."""
    groups: dict[tuple[str, str], list[Unit]] = {}
    for unit in units:
        if unit.quality is not None and unit.rating_return is not None:
            groups.setdefault((unit.configuration, unit.symbol), []).append(unit)
    return [
        Unit(
            configuration=configuration,
            symbol=symbol,
            model=Counter(u.model for u in found).most_common(1)[0][0],
            quality=math.fsum(u.quality or 0.0 for u in found) / len(found),
            rating_return=math.fsum(u.rating_return or 0.0 for u in found) / len(found),
        )
        for (configuration, symbol), found in sorted(groups.items())
    ]


def regression(units: Sequence[Unit]) -> tuple[Regression | None, float | None, float | None]:
    """Herculean's regression over `units` (run-averaged), and Spearman's rho without controls
    with its p-value (module docstring)."""
    qualities = [u.quality or 0.0 for u in units]
    returns = [u.rating_return or 0.0 for u in units]
    fitted = ols(
        returns,
        qualities,
        {"asset": [u.symbol for u in units], "backbone": [u.model for u in units]},
    )
    rho = spearman(qualities, returns)
    p = None
    if rho is not None and len(units) > 2:
        p = (
            0.0
            if abs(rho) >= 1
            else t_two_sided_p(rho * math.sqrt((len(units) - 2) / (1 - rho * rho)), len(units) - 2)
        )
    return fitted, rho, p


def _round(value: float | None, places: int = 6) -> float | None:
    return None if value is None else round(value, places)


def insights_record(
    engine: Engine,
    agent: str,
    market: str,
    window: tuple[datetime | None, datetime | None] = (None, None),
    source: ReplaySource | None = None,
) -> dict[str, Any]:
    """The Market Insights figures of `agent` and the market's regression (module docstring)."""
    every = units_of(engine, market, window, source)
    mine = every.get(agent, [])
    qualities = [u.quality for u in mine if u.quality is not None]
    averaged = run_averaged([u for found in every.values() for u in found])
    fitted, rho, p = regression(averaged)
    return {
        "report_quality": _round(math.fsum(qualities) / len(qualities)) if qualities else None,
        "report_quality_by_symbol": {u.symbol: _round(u.quality, 4) for u in mine},
        "rating_return_by_symbol": {u.symbol: _round(u.rating_return) for u in mine},
        "quality_return_units": len(averaged),
        "quality_return_effects": "asset, backbone",
        "quality_return_slope": None if fitted is None else _round(fitted.slope),
        "quality_return_stderr": None if fitted is None else _round(fitted.stderr),
        "quality_return_t": None if fitted is None else _round(fitted.t_stat),
        "quality_return_p": None if fitted is None else _round(fitted.p_value),
        "quality_return_r2": None if fitted is None else _round(fitted.r_squared),
        "quality_return_df": None if fitted is None else fitted.df_resid,
        "quality_return_spearman": _round(rho),
        "quality_return_spearman_p": _round(p),
    }
