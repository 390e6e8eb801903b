"""The `factor_model` baseline: a LightGBM ranker on point-in-time features, long its top k.

This module owns the agent. At each cycle it reads the daily bars of the symbols offered at the
slot (`Toolbox.bars_of`: only bars ended by the slot), scores each symbol's latest feature row
(`features.latest_rows`) with its model and holds the `top_k` best, equal weight: it sells what
fell out of the top k, then buys each newcomer up to `1 / top_k` of NAV (a holding still in the
top k is left as it is). The model is retrained every `retrain_sessions` sessions of the market's
calendar, counted from the calendar's first known session, so the schedule does not depend on
where a replay starts: the model used at a slot is the one trained at the open of the latest
session D whose ordinal is a multiple of `retrain_sessions`, from the bars ended by that open, on
the last `train_sessions` sessions whose `label_sessions`-bar forward return had ended by then
(`features.training_set`, strictly past), over the offered symbols that were members on D.
Training is deterministic (`ranker`), so the model is a pure function of (that open, those
symbols, their bars, the seed): the agent keeps the last few in a memo only to save work, and a
cycle run again after an interruption, or in another process, decides as the first run did.
Without a model (too little history) it holds what it holds and buys nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_DOWN, Decimal
from typing import Final

from openbell.agents.factor_model.features import FEATURE_BARS, latest_rows, training_set
from openbell.agents.factor_model.ranker import Ranker, train
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import ToolError
from openbell.markets.calendars import TradingCalendar, calendar_for
from openbell.markets.domain import Bar
from openbell.markets.gateway import MAX_LOOKBACK

#: The models kept in the memo (the current one and the one before, for a resumed cycle).
_KEPT_MODELS: Final = 2
_WEIGHT_PLACES: Final = Decimal("0.000001")
#: Bars read beyond the windows the schedule needs: room for a suspension inside them.
_SLACK_BARS: Final = 10

_ModelKey = tuple[datetime, tuple[str, ...]]


def bars_needed(*, train_sessions: int, label_sessions: int, retrain_sessions: int) -> int:
    """The daily bars per symbol a decision reads: the training window, the feature and label
    windows of its oldest and newest rows, the sessions since the last retraining and slack."""
    return train_sessions + label_sessions + FEATURE_BARS + retrain_sessions + _SLACK_BARS


def training_cutoff(calendar: TradingCalendar, now: datetime, every: int) -> datetime:
    """The open of the latest session D opening at or before `now` whose ordinal (its position
    among the calendar's sessions, the first known session being 0) is a multiple of `every`."""
    day = calendar.session_at_or_before(now)
    ordinal = len(calendar.sessions_between(calendar.first_known_session, day)) - 1
    for _ in range(ordinal % every):
        day = calendar.previous_session(day)
    return calendar.session_open(day)


@dataclass(frozen=True, slots=True, kw_only=True)
class FactorModel:
    """The LightGBM top-k baseline (see the module docstring).

    `top_k` is how many symbols it holds; `retrain_sessions` how often it retrains; the model
    learns from `train_sessions` sessions of rows labelled with `label_sessions`-bar forward
    returns; `seed` seeds LightGBM's bagging and feature sampling.
    """

    name: str
    market: str
    top_k: int = 5
    retrain_sessions: int = 20
    train_sessions: int = 60
    label_sessions: int = 5
    seed: int = 0
    kind: str = field(default="factor_model", init=False)
    _models: OrderedDict[_ModelKey, Ranker | None] = field(
        default_factory=OrderedDict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for name in ("top_k", "retrain_sessions", "train_sessions", "label_sessions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.lookback > MAX_LOOKBACK:
            raise ValueError(
                f"train_sessions + label_sessions + retrain_sessions need {self.lookback} daily "
                f"bars, more than the {MAX_LOOKBACK} a read may ask for"
            )

    @property
    def lookback(self) -> int:
        """The daily bars per symbol each decision reads."""
        return bars_needed(
            train_sessions=self.train_sessions,
            label_sessions=self.label_sessions,
            retrain_sessions=self.retrain_sessions,
        )

    async def decide(self, ctx: DecisionContext) -> None:
        tools = ctx.tools
        offered = ctx.universe.symbols
        if not offered:
            await tools.finish("Nothing is offered at this slot; no trades.")
            return
        bars = await tools.bars_of(offered, "1d", self.lookback)
        if isinstance(bars, ToolError):
            await tools.finish(f"No daily bars at this slot ({bars.message}); no trades.")
            return
        calendar = calendar_for(ctx.rules.calendar_id)
        cutoff_at = training_cutoff(calendar, ctx.now, self.retrain_sessions)
        day = calendar.session_at_or_before(cutoff_at)
        members = tuple(s for s in offered if ctx.whole_universe.is_member_on(s, day))
        model = self._model(cutoff_at, {symbol: bars[symbol] for symbol in members})
        if model is None:
            await tools.finish(f"Too little history to train by {cutoff_at.isoformat()}.")
            return
        rows = latest_rows(bars, ctx.now)
        scores = model.score(rows.values)
        ranked = sorted(zip(rows.symbols, scores.tolist(), strict=True), key=lambda p: -p[1])
        chosen = [symbol for symbol, _ in ranked[: self.top_k]]
        held = [symbol for symbol, quantity in tools.positions().items() if quantity > 0]
        # A holding that left the universe is sold too (it is no longer ranked, so it can
        # never be chosen again); a sell of it is refused only while it has no price.
        exits = [symbol for symbol in held if symbol not in chosen]
        for symbol in exits:
            reason = "left the model's top k" if symbol in offered else "left the universe"
            await tools.place_order(symbol, "sell", target_weight=Decimal(0), reason=reason)
        weight = (Decimal(1) / Decimal(self.top_k)).quantize(_WEIGHT_PLACES, ROUND_DOWN)
        entries = [symbol for symbol in chosen if symbol not in held]
        for symbol in entries:
            await tools.place_order(
                symbol, "buy", target_weight=weight, reason=f"in the model's top {self.top_k}"
            )
        await tools.finish(
            f"Model trained to {cutoff_at.isoformat()} on {model.trained_on.rows} rows; "
            f"top {self.top_k}: {', '.join(chosen) or 'none'}; bought {entries or 'none'}, "
            f"sold {exits or 'none'}."
        )

    def _model(self, cutoff_at: datetime, bars: Mapping[str, Sequence[Bar]]) -> Ranker | None:
        key = (cutoff_at, tuple(sorted(bars)))
        if key in self._models:
            self._models.move_to_end(key)
            return self._models[key]
        found = training_set(
            bars,
            cutoff_at,
            label_sessions=self.label_sessions,
            train_sessions=self.train_sessions,
        )
        model = train(found, self.seed)
        self._models[key] = model
        while len(self._models) > _KEPT_MODELS:
            self._models.popitem(last=False)
        return model
