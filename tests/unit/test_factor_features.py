"""The factor model's features and training set are point-in-time: at a decision instant `t` they
are the same when every bar not ended by `t` is removed from the data, or perturbed, whether
computed from the bars directly or read through the point-in-time gateway; a training row's label
window has ended by `t`; the features compute what their formulas say; the ranker is
deterministic for its seed; the retraining schedule does not depend on where a replay starts.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openbell.agents.factor_model.agent import bars_needed, training_cutoff
from openbell.agents.factor_model.features import (
    FEATURE_BARS,
    FEATURES,
    GRADES,
    FeatureRows,
    TrainingSet,
    grades_of,
    latest_rows,
    training_set,
)
from openbell.agents.factor_model.ranker import MIN_ROWS, train
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Bar, utc
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.replay_source import ReplaySource

DAY = timedelta(days=1)
FIRST = utc(2024, 1, 1)
LABEL = 3
TRAIN = 15


def series(symbol: str, steps: Sequence[int], volumes: Sequence[int]) -> list[Bar]:
    """UTC-day bars of `symbol`: each close moves by `step` tenths of a percent from the last."""
    bars: list[Bar] = []
    close = Decimal(100)
    for index, (step, volume) in enumerate(zip(steps, volumes, strict=True)):
        opened = close
        close = (close * (1 + Decimal(step) / 1000)).quantize(Decimal("0.0001"))
        start = FIRST + index * DAY
        bars.append(
            Bar(
                symbol=symbol,
                start_at=start,
                end_at=start + DAY,
                open=opened,
                high=max(opened, close) * Decimal("1.01"),
                low=min(opened, close) * Decimal("0.99"),
                close=close,
                volume=Decimal(volume),
            )
        )
    return bars


@st.composite
def markets(draw: st.DrawFn) -> dict[str, list[Bar]]:
    """Two to four symbols with 62 to 110 daily bars each (some start later than others)."""
    out: dict[str, list[Bar]] = {}
    for n in range(draw(st.integers(2, 4))):
        count = draw(st.integers(FEATURE_BARS + 1, 110))
        steps = draw(st.lists(st.integers(-60, 60), min_size=count, max_size=count))
        volumes = draw(st.lists(st.integers(0, 10**6), min_size=count, max_size=count))
        skipped = draw(st.integers(0, 10))
        bars = series(f"S{n}", steps, volumes)
        # A later listing: the bars are shifted by `skipped` days.
        out[f"S{n}"] = [
            Bar(
                symbol=bar.symbol,
                start_at=bar.start_at + skipped * DAY,
                end_at=bar.end_at + skipped * DAY,
                open=bar.open,
                high=bar.high,
                low=bar.low,
                close=bar.close,
                volume=bar.volume,
            )
            for bar in bars
        ]
    return out


def ended_by(bars: Mapping[str, Sequence[Bar]], at: datetime) -> dict[str, list[Bar]]:
    return {symbol: [bar for bar in found if bar.end_at <= at] for symbol, found in bars.items()}


def perturbed_after(
    bars: Mapping[str, Sequence[Bar]], at: datetime, factor: Decimal
) -> dict[str, list[Bar]]:
    """Every bar not ended by `at` with its prices scaled by `factor` and its volume changed."""
    return {
        symbol: [
            bar
            if bar.end_at <= at
            else Bar(
                symbol=bar.symbol,
                start_at=bar.start_at,
                end_at=bar.end_at,
                open=bar.open * factor,
                high=bar.high * factor,
                low=bar.low * factor,
                close=bar.close * factor,
                volume=bar.volume * 3 + 7,
            )
            for bar in found
        ]
        for symbol, found in bars.items()
    }


def same_rows(a: FeatureRows, b: FeatureRows) -> bool:
    return (
        a.symbols == b.symbols
        and a.session_at == b.session_at
        and np.array_equal(a.values, b.values, equal_nan=True)
    )


def same_training(a: TrainingSet, b: TrainingSet) -> bool:
    return (
        a.sessions == b.sessions
        and a.symbols == b.symbols
        and a.groups == b.groups
        and np.array_equal(a.values, b.values, equal_nan=True)
        and np.array_equal(a.returns, b.returns)
        and np.array_equal(a.grades, b.grades)
    )


def train_at(bars: Mapping[str, Sequence[Bar]], at: datetime) -> TrainingSet:
    return training_set(bars, at, label_sessions=LABEL, train_sessions=TRAIN)


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, list[Bar]], datetime, Decimal]:
    data = draw(markets())
    ends = sorted({bar.end_at for found in data.values() for bar in found})
    # Any instant from the first bar's end to past the last one, on and off bar boundaries.
    at = draw(st.sampled_from(ends)) + draw(st.sampled_from([timedelta(0), -timedelta(hours=5)]))
    factor = draw(st.sampled_from([Decimal("0.5"), Decimal("1.7"), Decimal(3)]))
    return data, at, factor


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_features_and_training_set_ignore_bars_not_ended_by_the_decision_time(
    case: tuple[dict[str, list[Bar]], datetime, Decimal],
) -> None:
    data, at, factor = case
    rows = latest_rows(data, at)
    assert same_rows(rows, latest_rows(ended_by(data, at), at))
    assert same_rows(rows, latest_rows(perturbed_after(data, at, factor), at))
    found = train_at(data, at)
    assert same_training(found, train_at(ended_by(data, at), at))
    assert same_training(found, train_at(perturbed_after(data, at, factor), at))


def gateway_bars(
    source: ReplaySource, symbols: Sequence[str], at: datetime
) -> dict[str, tuple[Bar, ...]]:
    gateway = PointInTimeGateway(source)
    lookback = bars_needed(train_sessions=TRAIN, label_sessions=LABEL, retrain_sessions=5)

    async def read() -> dict[str, tuple[Bar, ...]]:
        return {s: (await gateway.bars(s, "1d", lookback, at)).bars for s in symbols}

    return asyncio.run(read())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_through_the_gateway_the_future_changes_nothing(
    case: tuple[dict[str, list[Bar]], datetime, Decimal],
) -> None:
    data, at, factor = case
    symbols = sorted(data)
    every = [bar for found in data.values() for bar in found]
    full = gateway_bars(ReplaySource(market="crypto", bars={"1d": every}), symbols, at)
    past = [bar for found in ended_by(data, at).values() for bar in found]
    cut = gateway_bars(ReplaySource(market="crypto", bars={"1d": past}), symbols, at)
    changed = [bar for found in perturbed_after(data, at, factor).values() for bar in found]
    other = gateway_bars(ReplaySource(market="crypto", bars={"1d": changed}), symbols, at)
    assert all(bar.end_at <= at for found in full.values() for bar in found)
    for reads in (cut, other):
        assert same_rows(latest_rows(full, at), latest_rows(reads, at))
        assert same_training(train_at(full, at), train_at(reads, at))


def two_symbols(count: int) -> dict[str, list[Bar]]:
    up = series("UP", [10 + (i % 7) for i in range(count)], [1000 + i for i in range(count)])
    down = series("DN", [-5 + (i % 5) for i in range(count)], [2000 - i for i in range(count)])
    return {"UP": up, "DN": down}


def test_the_last_training_row_is_the_one_whose_label_window_has_ended() -> None:
    data = two_symbols(90)
    bars = data["UP"]
    k = 80  # the decision is made once bar k has ended
    ended = train_at(data, bars[k].end_at)
    assert ended.sessions[-1] == bars[k - LABEL].start_at
    # a microsecond earlier bar k has not ended: the row k - LABEL has no label yet
    before = train_at(data, bars[k].end_at - timedelta(microseconds=1))
    assert before.sessions[-1] == bars[k - 1 - LABEL].start_at
    # each session's rows: both symbols, labelled with the return LABEL bars on
    assert ended.groups == (2,) * len(ended.sessions)
    last = ended.returns[-1]  # UP, sorted after DN
    assert last == pytest.approx(float(bars[k].close / bars[k - LABEL].close - 1))
    assert len(ended.sessions) == TRAIN


def test_features_compute_their_formulas() -> None:
    data = two_symbols(70)
    bars = data["UP"]
    at = bars[-1].end_at
    rows = latest_rows(data, at)
    assert rows.symbols == ("DN", "UP")
    assert rows.session_at == bars[-1].start_at
    row = dict(zip(FEATURES, rows.values[1].tolist(), strict=True))
    closes = [float(bar.close) for bar in bars]
    volumes = [float(bar.volume) for bar in bars]
    assert row["ret_5"] == pytest.approx(closes[-1] / closes[-6] - 1)
    assert row["ret_20"] == pytest.approx(closes[-1] / closes[-21] - 1)
    assert row["ret_60"] == pytest.approx(closes[-1] / closes[-61] - 1)
    returns = [closes[i] / closes[i - 1] - 1 for i in range(len(closes) - 20, len(closes))]
    assert row["vol_20"] == pytest.approx(float(np.std(returns, ddof=1)))
    assert row["volume_ratio_5_20"] == pytest.approx(np.mean(volumes[-5:]) / np.mean(volumes[-20:]))
    amount = np.mean([c * v for c, v in zip(closes[-20:], volumes[-20:], strict=True)])
    assert row["amount_20"] == pytest.approx(math.log(amount + 1))
    low = min(float(bar.low) for bar in bars[-20:])
    high = max(float(bar.high) for bar in bars[-20:])
    assert row["rsv_20"] == pytest.approx((closes[-1] - low) / (high - low))
    # UP's volume rises with its price over the window: positive correlation
    assert row["corr_close_volume_20"] > 0.9


def test_a_symbol_without_a_bar_of_the_latest_session_is_not_ranked() -> None:
    data = two_symbols(70)
    data["DN"] = data["DN"][:-1]  # suspended on the last day
    rows = latest_rows(data, data["UP"][-1].end_at)
    assert rows.symbols == ("UP",)


def test_grades_sort_a_session_into_quantiles() -> None:
    returns = np.array([0.05, -0.02, 0.01, 0.03, -0.04, 0.0, 0.02, -0.01, 0.04, -0.03])
    grades = grades_of(returns)
    assert grades.tolist() == [4, 1, 2, 3, 0, 2, 3, 1, 4, 0]
    assert set(grades.tolist()) == set(range(GRADES))


def test_the_ranker_is_deterministic_for_its_seed() -> None:
    data = {
        f"S{n}": series(
            f"S{n}",
            [((i * (n + 3)) % 17) - 8 for i in range(120)],
            [1000 + ((i * (n + 5)) % 13) * 50 for i in range(120)],
        )
        for n in range(6)
    }
    at = data["S0"][-1].end_at
    found = training_set(data, at, label_sessions=LABEL, train_sessions=40)
    assert found.rows >= MIN_ROWS
    rows = latest_rows(data, at)
    first, again, other = train(found, 7), train(found, 7), train(found, 8)
    assert first is not None
    assert again is not None
    assert other is not None
    assert np.array_equal(first.score(rows.values), again.score(rows.values))
    assert first.booster.model_to_string() == again.booster.model_to_string()
    assert first.booster.model_to_string() != other.booster.model_to_string()
    # too few rows: no model
    assert train(train_at(data, data["S0"][FEATURE_BARS + LABEL + 2].end_at), 7) is None


def test_the_retraining_schedule_counts_calendar_sessions() -> None:
    calendar = calendar_for("XSHG")
    every = 20
    cutoffs = []
    day = utc(2025, 9, 30).date()
    for _ in range(45):
        now = calendar.session_open(day)
        cutoff = training_cutoff(calendar, now, every)
        assert cutoff <= now
        cutoffs.append(cutoff)
        day = calendar.next_session(day)
    distinct = sorted(set(cutoffs))
    # a new model every 20 sessions, whatever day the replay started on
    assert 2 <= len(distinct) <= 3
    for earlier, later in itertools.pairwise(distinct):
        sessions = calendar.sessions_between(
            calendar.session_at_or_before(earlier), calendar.session_at_or_before(later)
        )
        assert len(sessions) == every + 1
    # at a slot later in the day the cutoff is the same open
    assert training_cutoff(calendar, cutoffs[-1] + timedelta(hours=5), every) == cutoffs[-1]
