"""`RatingAgent`: at each cycle a model rates every offered symbol (Herculean's Market Insights),
and the report is traded through the rule of `rating.report`.

This module owns the agent the arena enrolls as `kind = "rating"` and its cycle:

1. The bars: the latest `lookback` bars of `interval` of every offered symbol
   (`weights_trading.bars`, through the toolbox, so the point-in-time rule is the toolbox's). The
   prompt lists each symbol's closes, oldest first.
2. The report: one chat-completions call asks for a rating, a confidence and a short rationale
   per symbol (`report.parse_report`). An answer that does not parse goes back to the model with
   the reason, up to `max_retries` more times; after that the cycle fails with `RatingRefused`
   (an `AgentError`) and the last reason. A model that cannot be reached fails the cycle too
   (`LlmUnavailable`, `LlmRefused`). Every message is in the cycle's trace, the tokens and cost
   in its usage (`Recorder`).
3. The stored report: a trace row of role `tool` and tool `ratings` whose result is the report
   with each symbol's target weight (`report.report_json`); `openbell trace` shows it as a table
   and `openbell report` measures the ratings' calibration from these rows. A cycle run again
   after an interruption asks again and stores a second row (the last one counts).
4. The trades: the weights of `report.target_weights`, traded by `weights_trading.rebalance`
   (sells before buys; a holding rated with no weight, or not offered any more, is sold to 0; a
   change smaller than `rebalance_band` is left alone). The cycle ends with `finish`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from openbell.agents import weights_trading
from openbell.agents.llm.client import Chat, ChatClient
from openbell.agents.llm.recorder import Prices, Recorder
from openbell.agents.protocol import DecisionContext
from openbell.agents.rating.report import (
    BadReport,
    Rating,
    SymbolRating,
    parse_report,
    report_json,
    target_weights,
)
from openbell.agents.weights_trading import WeightsAgent
from openbell.markets.domain import Bar
from openbell.markets.errors import AgentError, OpenbellError

RATING_KIND: Final = "rating"
#: The tool name of the trace row that stores a cycle's report.
RATINGS_TOOL: Final = "ratings"

SYSTEM_PROMPT: Final = f"""You are an equity and crypto research analyst. At each decision time \
you write a short market-insights report: a rating for every offered symbol on the scale \
{", ".join(rating.value for rating in Rating)}, your confidence in it (a number in [0, 1]) and \
a one-sentence rationale. You see each symbol's recent closes, oldest first; nothing later \
exists. The account is long-only: it holds the strong buys and buys, weighted by rating and \
confidence, and sells everything else.

Answer with one JSON object and nothing else:
{{"ratings": [{{"symbol": "<symbol>", "rating": "<one of the scale>", "confidence": <0..1>, \
"rationale": "<why>"}}, ...]}} with exactly one entry per offered symbol."""


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
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name=name, client=client, prices=prices, monotonic=monotonic)
        self._settings = settings if settings is not None else RatingSettings()

    @property
    def kind(self) -> str:
        """Always `rating`."""
        return RATING_KIND

    async def decide(self, ctx: DecisionContext) -> None:
        """One cycle: the bars, the report (stored in the trace) and the trades."""
        recorder = self.recorder(ctx)
        try:
            bars = await weights_trading.bars(ctx, self._settings.interval, self._settings.lookback)
            offered = sorted(bars)
            if not offered:
                await ctx.tools.finish("No symbol has bars; holding.")
                return
            async with self._client.connect() as chat:
                ratings = await self._ask(chat, recorder, ctx, bars)
            weights = target_weights(ratings, max_weight=self._settings.max_weight)
            recorder.trace(
                "tool",
                tool=RATINGS_TOOL,
                arguments=f'{{"symbols": {len(offered)}}}',
                result=report_json(ratings, weights),
            )
            recorder.flush()
            await weights_trading.rebalance(
                ctx,
                weights,
                band=self._settings.rebalance_band,
                reason="rating target weight",
                whose="the ratings'",
            )
        except OpenbellError as exc:
            recorder.trace("error", content=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            recorder.flush()

    async def _ask(
        self,
        chat: Chat,
        recorder: Recorder,
        ctx: DecisionContext,
        bars: Mapping[str, Sequence[Bar]],
    ) -> tuple[SymbolRating, ...]:
        conversation: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": _user_prompt(ctx, bars, self._settings.interval)},
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
            )
            try:
                return parse_report(completion.content, set(bars))
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


def _user_prompt(ctx: DecisionContext, bars: Mapping[str, Sequence[Bar]], interval: str) -> str:
    lines = [
        (
            f"Decision time: {ctx.now.isoformat()}. Market: {ctx.market}. Recent {interval} "
            "closes per symbol, oldest first:"
        )
    ]
    lines.extend(
        f"{symbol}: {' '.join(str(bar.close) for bar in series)}"
        for symbol, series in sorted(bars.items())
    )
    lines.append("Write the report.")
    return "\n".join(lines)
