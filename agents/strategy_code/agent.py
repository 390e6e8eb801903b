"""`StrategyCodeAgent`: a model writes a strategy as code once (and on a schedule); the sandbox
runs it every cycle; its weights are traded like any agent's.

This module owns the agent the arena enrolls as `kind = "strategy_code"` and its cycle:

1. A cycle that already has a stored run (run again after an interruption) trades that run's
   weights again; nothing is asked or run twice.
2. The bars: the latest `lookback` bars of `interval` of every offered symbol
   (`weights_trading.bars`, through the toolbox, so the point-in-time rule is the toolbox's).
3. The strategy: the account's newest stored one, unless there is none or it has had
   `rewrite_every` runs (0: never rewritten), in which case the model writes one
   (`writer.write_strategy`: checked, then given a trial run on these bars) and it is stored with
   its claim. If the model gives no acceptable strategy, the cycle fails (`StrategyRefused`),
   unless an older strategy exists, which then keeps running (the refusal is in the trace); the
   same when the model cannot be reached or refuses the request (`LlmUnavailable`,
   `LlmRefused`). A rewrite that did not happen is due again at the next cycle.
4. The run: the sandbox runs the code on the bars (`sandbox.run_strategy`: in its jail unless
   the operator allowed otherwise, `sandboxed`) and the run is stored, whatever its outcome;
   its error, masked with every configured secret (`redactor`) and cut, is what the model (in a
   retry), the trace, the ledger and the logs see.
5. The trades: a run with valid weights rebalances the account towards them
   (`weights_trading.rebalance`: sells before buys; a holding the weights leave out is sold; a
   change smaller than `rebalance_band` is left alone). A run without valid weights holds the
   account as it is. The cycle ends with `finish`.

The ledger (the cycle's `journal`) must also be a `StrategyStore`; the daemon's `Ledger` is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol, runtime_checkable

from openbell.agents import weights_trading
from openbell.agents.kinds import STRATEGY_CODE_KIND
from openbell.agents.llm.client import ChatClient
from openbell.agents.llm.recorder import Prices, Recorder
from openbell.agents.protocol import DecisionContext
from openbell.agents.strategy_code.sandbox import (
    RunOutcome,
    RunResult,
    SandboxLimits,
    run_strategy,
)
from openbell.agents.strategy_code.writer import (
    SYSTEM_PROMPT,
    StrategyRefused,
    Trial,
    user_prompt,
    write_strategy,
)
from openbell.agents.weights_trading import WeightsAgent
from openbell.markets.errors import ConfigError, LlmRefused, LlmUnavailable, OpenbellError
from openbell.store.redact import Redactor
from openbell.store.strategy_runs import StrategyCode, StrategyRun


@runtime_checkable
class StrategyStore(Protocol):
    """Where the agent keeps its strategies and runs (`Ledger` is one)."""

    def save_strategy(self, strategy: StrategyCode) -> StrategyCode: ...

    def latest_strategy(self, account_id: int) -> tuple[StrategyCode, int] | None: ...

    def record_strategy_run(self, run: StrategyRun) -> StrategyRun: ...

    def strategy_run(self, cycle_id: int) -> StrategyRun | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategySettings:
    """The schedule, the bars and the limits of a strategy-code agent (see the module
    docstring; the config keys have the same names)."""

    interval: str = "1d"
    lookback: int = 250
    rewrite_every: int = 0
    max_retries: int = 3
    rebalance_band: Decimal = Decimal("0.01")
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    #: False only where the operator allowed strategy code to run without its jail.
    sandboxed: bool = True

    def __post_init__(self) -> None:
        if self.interval not in ("1d", "1h"):
            raise ValueError(f"interval is 1d or 1h, got {self.interval!r}")
        if self.lookback < 1 or self.rewrite_every < 0 or self.max_retries < 0:
            raise ValueError("lookback must be positive, rewrite_every and max_retries >= 0")
        if not 0 <= self.rebalance_band < 1:
            raise ValueError(f"rebalance_band is in [0, 1), got {self.rebalance_band}")


class StrategyCodeAgent(WeightsAgent):
    """A strategy-code agent; see the module docstring."""

    def __init__(
        self,
        *,
        name: str,
        client: ChatClient,
        settings: StrategySettings | None = None,
        prices: Prices | None = None,
        redactor: Redactor | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name=name, client=client, prices=prices, monotonic=monotonic)
        self._settings = settings if settings is not None else StrategySettings()
        self._redactor = redactor if redactor is not None else client.redact

    @property
    def sandboxed(self) -> bool:
        """Whether its code runs in the jail (False only where the operator allowed it)."""
        return self._settings.sandboxed

    def recorder(self, ctx: DecisionContext) -> Recorder:
        """The cycle's trace and usage, masked with every configured secret."""
        return Recorder(ctx, redact=self._redactor, prices=self._prices, monotonic=self._monotonic)

    @property
    def kind(self) -> str:
        """Always `strategy_code`."""
        return STRATEGY_CODE_KIND

    async def decide(self, ctx: DecisionContext) -> None:
        """One cycle: the strategy (stored or newly written), its run, and the trades."""
        store: object = ctx.journal
        if not isinstance(store, StrategyStore):
            raise ConfigError("a strategy_code agent needs a ledger that stores strategies")
        recorder = self.recorder(ctx)
        try:
            run = store.strategy_run(ctx.cycle_id)
            if run is None:
                run = await self._run(ctx, store, recorder)
            if run.outcome != RunOutcome.OK:
                await ctx.tools.finish(
                    f"The strategy's run gave no weights ({run.outcome}); holding."
                )
            else:
                await weights_trading.rebalance(
                    ctx,
                    run.weights,
                    band=self._settings.rebalance_band,
                    reason="strategy code target weight",
                    whose="the strategy's",
                )
        except OpenbellError as exc:
            recorder.trace("error", content=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            recorder.flush()

    async def _run(
        self, ctx: DecisionContext, store: StrategyStore, recorder: Recorder
    ) -> StrategyRun:
        bars = await weights_trading.bars(ctx, self._settings.interval, self._settings.lookback)
        offered = sorted(bars)
        limits = self._settings.limits

        async def trial(code: str) -> RunResult:
            return await run_strategy(
                code,
                bars,
                offered=offered,
                limits=limits,
                sandboxed=self._settings.sandboxed,
                redactor=self._redactor,
                monotonic=self._monotonic,
            )

        latest = store.latest_strategy(ctx.account_id)
        written = None
        every = self._settings.rewrite_every
        if latest is None or (every > 0 and latest[1] >= every):
            try:
                written = await self._write(ctx, store, recorder, trial, offered)
            except (StrategyRefused, LlmUnavailable, LlmRefused) as exc:
                if latest is None:
                    raise
                recorder.trace(
                    "refusal",
                    content=f"{type(exc).__name__}: {exc}; the previous strategy runs on",
                )
        if written is not None:
            strategy, result = written
        elif latest is not None:
            strategy = latest[0]
            result = await trial(strategy.code)
        else:  # pragma: no cover  (a refusal without an older strategy was raised above)
            raise StrategyRefused("no strategy to run")
        if strategy.strategy_id is None:
            raise ValueError("the strategy was not stored")
        run = store.record_strategy_run(
            StrategyRun(
                strategy_id=strategy.strategy_id,
                cycle_id=ctx.cycle_id,
                ran_at=ctx.now,
                duration_ms=result.duration_ms,
                outcome=result.outcome.value,
                weights=result.weights,
                error=result.error or None,
                offered=tuple(offered),
            )
        )
        recorder.trace(
            "tool",
            tool="strategy",
            arguments=json.dumps({"strategy_id": strategy.strategy_id, "symbols": offered}),
            result=_run_text(run),
            latency_ms=run.duration_ms,
        )
        return run

    async def _write(
        self,
        ctx: DecisionContext,
        store: StrategyStore,
        recorder: Recorder,
        trial: Trial,
        offered: Sequence[str],
    ) -> tuple[StrategyCode, RunResult]:
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {
                "role": "user",
                "content": user_prompt(
                    now=ctx.now,
                    market=ctx.market,
                    symbols=offered,
                    interval=self._settings.interval,
                    lookback=self._settings.lookback,
                ),
            },
        ]
        async with self._client.connect() as chat:
            written = await write_strategy(
                chat=chat,
                recorder=recorder,
                messages=messages,
                trial=trial,
                max_retries=self._settings.max_retries,
            )
        claim = written.draft.claim
        strategy = store.save_strategy(
            StrategyCode(
                account_id=ctx.account_id,
                cycle_id=ctx.cycle_id,
                written_at=ctx.now,
                code=written.draft.code,
                rationale=claim.rationale,
                claimed_return=claim.expected_return,
                claimed_hit_rate=claim.hit_rate,
                answers=written.answers,
            )
        )
        return strategy, written.trial


def _run_text(run: StrategyRun) -> str:
    return json.dumps(
        {
            "outcome": run.outcome,
            "duration_ms": run.duration_ms,
            "weights": {symbol: str(weight) for symbol, weight in run.weights.items()},
            "error": run.error,
        }
    )
