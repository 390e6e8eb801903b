"""Strategy-code agents' strategies and runs: the code a model wrote, the edge it claimed, and
every run of it, with the concordance of the claim with what the account then earned.

This module owns the `strategy_code` and `strategy_run` tables and their reads and writes, on
behalf of `Ledger` (of which `StrategyRuns` is a part). A strategy is stored once it passed the
look-ahead check: its account, the cycle that wrote it, the code, the claimed expected return per
cycle and hit rate (either may be absent), the model's rationale and how many answers it took.
A run is one execution at one cycle (unique per cycle: a cycle run again after an interruption
reads the stored run and places the same orders): when, how long, its outcome (`ok`, `error`,
`invalid`, `timeout`, `killed`), its weights (exact decimal strings, JSON) or its error, and the
symbols it was given (JSON; none for runs stored before migration 0020).

`strategy_concordance` is FIDES' concordance gap: for each strategy, the realised return of each
cycle whose run gave weights, measured from the account's slot NAV snapshot at that cycle to its
next slot snapshot (the snapshot of a slot is taken after its trades, so the period holds what the
weights bought, fees of the next rebalance included), against the claim; with those periods'
spans and returns, the symbols the first run was given, and how many different weight sets the
valid runs gave (what `ops/evaluation/concordance` scores FIDES' three gaps from).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from sqlalchemy import Connection, Row, bindparam, func, insert, select
from sqlalchemy.exc import IntegrityError

from openbell.markets.domain import check_utc
from openbell.store.core_tables import (
    CYCLE_TABLE,
    NAV_SNAPSHOT_TABLE,
    STRATEGY_CODE_TABLE,
    STRATEGY_RUN_TABLE,
)
from openbell.store.rows import LedgerTables, row_id

#: The outcomes a run may have (a CHECK constraint; `agents.strategy_code.sandbox.RunOutcome`).
RUN_OUTCOMES: Final = ("ok", "error", "invalid", "timeout", "killed")


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyCode:
    """A strategy as stored (`strategy_id` None before it is). `claimed_return` is the expected
    return per cycle the model asserted, `claimed_hit_rate` the share of cycles it said would
    gain; `answers` is how many model answers it took (refused ones included)."""

    account_id: int
    cycle_id: int
    written_at: datetime
    code: str
    rationale: str
    claimed_return: Decimal | None = None
    claimed_hit_rate: Decimal | None = None
    answers: int = 1
    strategy_id: int | None = None

    def __post_init__(self) -> None:
        check_utc("written_at", self.written_at)
        if self.claimed_hit_rate is not None and not 0 <= self.claimed_hit_rate <= 1:
            raise ValueError(f"a hit rate is in [0, 1], got {self.claimed_hit_rate}")


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyRun:
    """One run of strategy `strategy_id` at cycle `cycle_id` (`outcome` in `RUN_OUTCOMES`);
    `offered`, the symbols it was given (empty for a run stored before they were kept)."""

    strategy_id: int
    cycle_id: int
    ran_at: datetime
    duration_ms: int
    outcome: str
    weights: Mapping[str, Decimal] = field(default_factory=dict)
    error: str | None = None
    offered: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_utc("ran_at", self.ran_at)
        if self.outcome not in RUN_OUTCOMES:
            raise ValueError(f"unknown run outcome {self.outcome!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Concordance:
    """A strategy's claim against its realised outcome (returns are fractions per cycle).

    `periods` counts the cycles with weights and a next slot snapshot, `spans` their (start, end)
    instants and `returns` their returns, in time order; the realised figures are None without
    any. The gaps are claimed minus realised (positive: the model over-claimed). `offered` is what
    its first run was given (the universe its buy-and-hold is of), `distinct_weights` how many
    different weight sets its valid runs gave, and `invested_runs` how many of them held anything.
    """

    strategy: StrategyCode
    runs: int
    failed_runs: int
    periods: int
    realised_return: float | None
    realised_hit_rate: float | None
    spans: tuple[tuple[datetime, datetime], ...] = ()
    returns: tuple[float, ...] = ()
    offered: tuple[str, ...] = ()
    distinct_weights: int = 0
    invested_runs: int = 0

    @property
    def return_gap(self) -> float | None:
        """Claimed minus realised mean return per cycle."""
        if self.strategy.claimed_return is None or self.realised_return is None:
            return None
        return float(self.strategy.claimed_return) - self.realised_return

    @property
    def hit_rate_gap(self) -> float | None:
        """Claimed minus realised hit rate."""
        if self.strategy.claimed_hit_rate is None or self.realised_hit_rate is None:
            return None
        return float(self.strategy.claimed_hit_rate) - self.realised_hit_rate


class StrategyRuns(LedgerTables):
    """The strategy-code agents' strategies and runs (see the module docstring)."""

    def save_strategy(self, strategy: StrategyCode) -> StrategyCode:
        """Store `strategy`; the stored one, with its id."""
        with self._writing() as connection:
            added = insert(_CODE).values(
                account_id=strategy.account_id,
                cycle_id=strategy.cycle_id,
                written_at=strategy.written_at,
                code=strategy.code,
                claimed_return=strategy.claimed_return,
                claimed_hit_rate=strategy.claimed_hit_rate,
                rationale=strategy.rationale,
                answers=strategy.answers,
            )
            return _strategy(connection.execute(added.returning(*_CODE.c)).one())

    def latest_strategy(self, account_id: int) -> tuple[StrategyCode, int] | None:
        """The account's newest strategy and how many runs it has had, or None."""
        with self._reading() as connection:
            row = connection.execute(
                select(_CODE).where(_CODE.c.account_id == account_id).order_by(_CODE.c.id.desc())
            ).first()
            if row is None:
                return None
            runs = connection.execute(
                select(func.count()).select_from(_RUN).where(_RUN.c.strategy_id == row.id)
            ).scalar_one()
            return _strategy(row), int(runs)

    def strategies(self, account_id: int) -> list[StrategyCode]:
        """Every strategy of the account, oldest first."""
        with self._reading() as connection:
            rows = connection.execute(_STRATEGIES, {"account": account_id}).all()
        return [_strategy(row) for row in rows]

    def record_strategy_run(self, run: StrategyRun) -> StrategyRun:
        """Store `run`; when the cycle already has a run, that one is returned unchanged.

        `ValueError` when the cycle or the strategy is unknown, or they belong to two accounts.
        """
        try:
            with self._writing() as connection:
                stored = _run_of_cycle(connection, run.cycle_id)
                if stored is not None:
                    return stored
                cycle = connection.execute(
                    select(CYCLE_TABLE.c.account_id).where(CYCLE_TABLE.c.id == run.cycle_id)
                ).scalar()
                strategy = connection.execute(
                    select(_CODE.c.account_id).where(_CODE.c.id == run.strategy_id)
                ).scalar()
                if cycle is None or strategy is None or cycle != strategy:
                    raise ValueError(
                        f"strategy {run.strategy_id} and cycle {run.cycle_id} "
                        "are not of one account"
                    )
                connection.execute(
                    insert(_RUN).values(
                        strategy_id=run.strategy_id,
                        cycle_id=run.cycle_id,
                        ran_at=run.ran_at,
                        duration_ms=run.duration_ms,
                        outcome=run.outcome,
                        weights=_weights_text(run.weights) if run.outcome == "ok" else None,
                        error=run.error,
                        offered=json.dumps(list(run.offered)),
                    )
                )
                return run
        except IntegrityError:
            with self._reading() as connection:
                stored = _run_of_cycle(connection, run.cycle_id)
            if stored is None:
                raise
            return stored

    def strategy_run(self, cycle_id: int) -> StrategyRun | None:
        """The run stored for cycle `cycle_id`, or None."""
        with self._reading() as connection:
            return _run_of_cycle(connection, cycle_id)

    def strategy_runs(self, strategy_id: int) -> list[StrategyRun]:
        """Every run of strategy `strategy_id`, in time order."""
        with self._reading() as connection:
            return _runs(connection, strategy_id)

    def strategy_concordance(self, account_id: int) -> list[Concordance]:
        """Each of the account's strategies, its claim against its realised outcome."""
        with self._reading() as connection:
            navs: dict[datetime, Decimal] = {
                row.at: row.nav for row in connection.execute(_SLOT_NAVS, {"account": account_id})
            }
            rows = connection.execute(_STRATEGIES, {"account": account_id}).all()
            return [
                _concordance(_strategy(row), _runs(connection, row_id(row.id)), navs)
                for row in rows
            ]


def _concordance(
    strategy: StrategyCode, runs: Sequence[StrategyRun], navs: Mapping[datetime, Decimal]
) -> Concordance:
    times = sorted(navs)
    following = dict(itertools.pairwise(times))
    spans: list[tuple[datetime, datetime]] = []
    returns: list[float] = []
    for run in runs:
        then = following.get(run.ran_at)
        if run.outcome != "ok" or then is None or navs[run.ran_at] <= 0:
            continue
        spans.append((run.ran_at, then))
        returns.append(float(navs[then] / navs[run.ran_at] - 1))
    mean = math.fsum(returns) / len(returns) if returns else None
    hits = sum(1 for value in returns if value > 0) / len(returns) if returns else None
    valid = [run for run in runs if run.outcome == "ok"]
    return Concordance(
        strategy=strategy,
        runs=len(runs),
        failed_runs=len(runs) - len(valid),
        periods=len(returns),
        realised_return=mean,
        realised_hit_rate=hits,
        spans=tuple(spans),
        returns=tuple(returns),
        offered=runs[0].offered if runs else (),
        distinct_weights=len({_weights_text(run.weights) for run in valid}),
        invested_runs=sum(1 for run in valid if any(w > 0 for w in run.weights.values())),
    )


def _strategy(row: Row[Any]) -> StrategyCode:
    return StrategyCode(
        strategy_id=row_id(row.id),
        account_id=row.account_id,
        cycle_id=row.cycle_id,
        written_at=row.written_at,
        code=row.code,
        rationale=row.rationale,
        claimed_return=row.claimed_return,
        claimed_hit_rate=row.claimed_hit_rate,
        answers=row.answers,
    )


def _runs(connection: Connection, strategy_id: int) -> list[StrategyRun]:
    rows = connection.execute(_RUNS, {"strategy": strategy_id}).all()
    return [_run(row) for row in rows]


def _run_of_cycle(connection: Connection, cycle_id: int) -> StrategyRun | None:
    row = connection.execute(select(_RUN).where(_RUN.c.cycle_id == cycle_id)).first()
    return None if row is None else _run(row)


def _run(row: Row[Any]) -> StrategyRun:
    weights = json.loads(row.weights) if row.weights else {}
    return StrategyRun(
        strategy_id=row.strategy_id,
        cycle_id=row.cycle_id,
        ran_at=row.ran_at,
        duration_ms=row.duration_ms,
        outcome=row.outcome,
        weights={symbol: Decimal(value) for symbol, value in weights.items()},
        error=row.error,
        offered=tuple(json.loads(row.offered)) if row.offered else (),
    )


def _weights_text(weights: Mapping[str, Decimal]) -> str:
    return json.dumps({symbol: str(weight) for symbol, weight in sorted(weights.items())})


_CODE: Final = STRATEGY_CODE_TABLE
_RUN: Final = STRATEGY_RUN_TABLE
_STRATEGIES: Final = (
    select(_CODE).where(_CODE.c.account_id == bindparam("account")).order_by(_CODE.c.id)
)
_RUNS: Final = (
    select(_RUN)
    .where(_RUN.c.strategy_id == bindparam("strategy"))
    .order_by(_RUN.c.ran_at, _RUN.c.id)
)
_SLOT_NAVS: Final = (
    select(NAV_SNAPSHOT_TABLE.c.at, NAV_SNAPSHOT_TABLE.c.nav)
    .where(
        NAV_SNAPSHOT_TABLE.c.account_id == bindparam("account"),
        NAV_SNAPSHOT_TABLE.c.kind == "slot",
    )
    .order_by(NAV_SNAPSHOT_TABLE.c.at)
)
