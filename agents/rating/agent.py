"""`RatingAgent`: at each cycle a model rates every offered symbol (Herculean's Market Insights),
and the report is traded through the rule of `rating.report`.

This module owns the agent the arena enrolls as `kind = "rating"` and its cycle:

1. The bars: the latest `lookback` bars of `interval` of every offered symbol
   (`weights_trading.bars`, through the toolbox, so the point-in-time rule is the toolbox's). The
   prompt lists each symbol's closes, oldest first; with `insights` (Market Insights reports),
   also the evidence of `rating.prompts` (returns, the peers' mean return, the week's news).
2. The report: one chat-completions call asks for a rating, a confidence and a short rationale
   per symbol, and with `insights` a report of Herculean's eight sections (`report.parse_report`).
   An answer that does not parse goes back to the model with the reason, up to `max_retries` more
   times; after that the cycle fails with `RatingRefused` (an `AgentError`) and the last reason.
   A model that cannot be reached fails the cycle too (`LlmUnavailable`, `LlmRefused`). Every
   message is in the cycle's trace, the tokens and cost in its usage (`Recorder`).
3. The stored report: a trace row of role `tool` and tool `ratings` whose result is the report
   with each symbol's target weight and the model's name (`report.report_json`); with `insights`,
   one `insight_report` row a symbol with its sections. `openbell trace` shows the ratings as a
   table and `openbell report` measures them from these rows. A cycle run again after an
   interruption asks again and stores a second row (the last one counts).
4. The trades: the weights of `report.target_weights` (signed, sells and strong sells short, when
   the account may short: `Toolbox.shorting`), traded by `weights_trading.rebalance` (sells and
   covers before shorts and buys; a holding rated with no weight, or not offered any more, is
   closed; a change smaller than `rebalance_band` is left alone). The cycle ends with `finish`.
5. The verdicts: with a `judge` (`rating.quality_judge.ReportJudge`), each symbol's report is scored
   on Herculean's rubric against the evidence the model was shown, after the trades, and stored as a
   `report_quality` row (the judge's tokens in the row, not in the agent's usage: judging is the
   arena's cost, not the agent's). A judge that fails leaves a verdict with its error.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from openbell.agents import weights_trading
from openbell.agents.kinds import RATING_KIND, RATINGS_TOOL
from openbell.agents.llm.client import Chat, ChatClient
from openbell.agents.llm.recorder import Prices, Recorder
from openbell.agents.protocol import DecisionContext
from openbell.agents.rating.prompts import evidence, system_prompt, user_prompt
from openbell.agents.rating.quality_judge import QUALITY_TOOL, ReportJudge, verdict_json
from openbell.agents.rating.report import (
    BadReport,
    SymbolRating,
    parse_report,
    report_json,
    sections_json,
    target_weights,
)
from openbell.agents.weights_trading import WeightsAgent
from openbell.markets.errors import AgentError, OpenbellError

#: The tool name of the trace rows that store a Market Insights report's sections, one a symbol.
INSIGHT_TOOL: Final = "insight_report"
#: The system prompt of a long-only rating agent writing plain ratings.
SYSTEM_PROMPT: Final = system_prompt(signed=False, insights=False)


class RatingRefused(AgentError):
    """Every answer the model gave in a cycle was refused; the message has the last reason."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RatingSettings:
    """The bars, the retry limit and the rule's parameters of a rating agent (see the module
    docstring; the config keys have the same names)."""

    interval: str = "1d"
    lookback: int = 20
    max_retries: int = 2
    max_weight: Decimal = Decimal("0.25")
    rebalance_band: Decimal = Decimal("0.01")
    #: Market Insights reports (Herculean's eight sections) rather than plain ratings.
    insights: bool = False

    def __post_init__(self) -> None:
        if self.interval not in ("1d", "1h"):
            raise ValueError(f"interval is 1d or 1h, got {self.interval!r}")
        if self.lookback < 1 or self.max_retries < 0:
            raise ValueError("lookback must be positive, max_retries >= 0")
        if not 0 < self.max_weight <= 1:
            raise ValueError(f"max_weight is in (0, 1], got {self.max_weight}")
        if not 0 <= self.rebalance_band < 1:
            raise ValueError(f"rebalance_band is in [0, 1), got {self.rebalance_band}")


class RatingAgent(WeightsAgent):
    """A rating agent; see the module docstring."""

    def __init__(
        self,
        *,
        name: str,
        client: ChatClient,
        settings: RatingSettings | None = None,
        prices: Prices | None = None,
        judge: ReportJudge | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name=name, client=client, prices=prices, monotonic=monotonic)
        self._settings = settings if settings is not None else RatingSettings()
        if judge is not None and not self._settings.insights:
            raise ValueError("a judge scores Market Insights reports: set insights")
        self._judge = judge

    @property
    def kind(self) -> str:
        """Always `rating`."""
        return RATING_KIND

    async def decide(self, ctx: DecisionContext) -> None:
        """One cycle: the bars, the report (stored in the trace), the trades, then the judge's
        verdicts on a Market Insights report (stored in the trace too)."""
        recorder = self.recorder(ctx)
        settings = self._settings
        try:
            bars = await weights_trading.bars(ctx, settings.interval, settings.lookback)
            offered = sorted(bars)
            if not offered:
                await ctx.tools.finish("No symbol has bars; holding.")
                return
            signed = ctx.tools.shorting
            shown = await evidence(ctx, bars, insights=settings.insights)
            async with self._client.connect() as chat:
                ratings = await self._ask(chat, recorder, ctx, shown, signed=signed)
            weights = target_weights(ratings, max_weight=settings.max_weight, signed=signed)
            recorder.trace(
                "tool",
                tool=RATINGS_TOOL,
                arguments=f'{{"symbols": {len(offered)}}}',
                result=report_json(ratings, weights, model=self._client.config.model),
            )
            for rating in ratings if settings.insights else ():
                recorder.trace(
                    "tool",
                    tool=INSIGHT_TOOL,
                    arguments=json.dumps({"symbol": rating.symbol}),
                    result=sections_json(rating),
                )
            recorder.flush()
            await weights_trading.rebalance(
                ctx,
                weights,
                band=settings.rebalance_band,
                reason="rating target weight",
                whose="the ratings'",
            )
            if self._judge is not None:
                await self._judged(self._judge, recorder, ctx, shown, ratings)
        except OpenbellError as exc:
            recorder.trace("error", content=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            recorder.flush()

    async def _judged(
        self,
        judge: ReportJudge,
        recorder: Recorder,
        ctx: DecisionContext,
        shown: Mapping[str, str],
        ratings: Sequence[SymbolRating],
    ) -> None:
        """Each report's verdict, asked concurrently, stored one trace row a symbol."""
        started = self._monotonic()
        head = f"Decision time: {ctx.now.isoformat()}. Market: {ctx.market}.\n"
        verdicts = await asyncio.gather(
            *(judge.judge(evidence=head + shown[r.symbol], rating=r) for r in ratings)
        )
        latency_ms = round((self._monotonic() - started) * 1000)
        for rating, verdict in zip(ratings, verdicts, strict=True):
            recorder.trace(
                "tool",
                tool=QUALITY_TOOL,
                arguments=json.dumps({"symbol": rating.symbol, "judge_model": judge.model}),
                result=verdict_json(rating.symbol, verdict),
                tokens_in=verdict.tokens_in,
                tokens_out=verdict.tokens_out,
                latency_ms=latency_ms,
            )

    async def _ask(
        self,
        chat: Chat,
        recorder: Recorder,
        ctx: DecisionContext,
        shown: Mapping[str, str],
        *,
        signed: bool,
    ) -> tuple[SymbolRating, ...]:
        insights = self._settings.insights
        conversation: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt(signed=signed, insights=insights)},
            {"role": "user", "content": user_prompt(ctx, shown, self._settings.interval)},
        ]
        for message in conversation:
            recorder.trace(message["role"], content=message["content"])
        reason = ""
        for _ in range(self._settings.max_retries + 1):
            recorder.flush()
            answer = await chat.complete(conversation, on_attempt=recorder.attempt)
            completion = answer.completion
            recorder.completion(completion.usage)
            recorder.trace(
                "assistant",
                content=completion.content,
                tokens_in=completion.usage.tokens_in,
                tokens_out=completion.usage.tokens_out,
                latency_ms=answer.latency_ms,
                request_digest=answer.request_digest or None,
                response=answer.response or None,
            )
            try:
                return parse_report(completion.content, set(shown), with_sections=insights)
            except BadReport as exc:
                recorder.errors(parse_failures=1, invalid_tool_calls=0)
                reason = str(exc)
            recorder.trace("refusal", content=reason)
            conversation.extend(
                [
                    {"role": "assistant", "content": completion.content},
                    {
                        "role": "user",
                        "content": f"Refused: {reason}\nAnswer with the whole JSON object again.",
                    },
                ]
            )
        raise RatingRefused(
            f"no valid rating report after {self._settings.max_retries + 1} answers; last: {reason}"
        )
