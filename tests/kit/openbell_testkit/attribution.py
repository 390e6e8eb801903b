"""A planted market for the attribution tests: daily bars whose returns pay momentum, by design.

Each of `names` symbols returns `b_i * m_t + gamma * z_it + e_it` a day: `m_t` a market move
(mean 0.05 %, sd 1 %), `b_i` a loading in [0.6, 1.4], `e_it` noise with a per-symbol sd in
[1 %, 3 %], and `z_it` the symbol's momentum (its close five bars ago over its close twenty
bars ago, the `exposures` definition with the default windows) standardised across symbols:
momentum is the one style this market pays, `gamma` a day per unit of exposure. Volumes are
random (log-normal per symbol, +-50 % a day). Deterministic for a seed.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np

from openbell.markets.domain import Bar

START = datetime(2024, 1, 1, tzinfo=UTC)


def _bar(symbol: str, day: int, opened: float, closed: float, volume: float) -> Bar:
    return Bar(
        symbol=symbol,
        start_at=START + timedelta(days=day),
        end_at=START + timedelta(days=day + 1),
        open=Decimal(f"{opened:.6f}"),
        high=Decimal(f"{max(opened, closed):.6f}"),
        low=Decimal(f"{min(opened, closed):.6f}"),
        close=Decimal(f"{closed:.6f}"),
        volume=Decimal(f"{volume:.0f}"),
    )


def momentum_market(
    seed: int, *, names: int = 60, days: int = 200, gamma: float = 0.003
) -> dict[str, tuple[Bar, ...]]:
    """The planted market's daily bars by symbol (`S00`, `S01`, ...), oldest first (built once
    per arguments in a process: the tests of several books share it)."""
    return dict(_market(seed, names, days, gamma))


@functools.cache
def _market(
    seed: int, names: int, days: int, gamma: float
) -> tuple[tuple[str, tuple[Bar, ...]], ...]:
    rng = np.random.default_rng(seed)
    loading = rng.uniform(0.6, 1.4, names)
    noise = rng.uniform(0.01, 0.03, names)
    volume = rng.lognormal(10.0, 1.0, names)
    symbols = [f"S{index:02d}" for index in range(names)]
    history = [np.full(names, 100.0)]
    out: dict[str, list[Bar]] = {symbol: [] for symbol in symbols}
    for day in range(days):
        signal = np.zeros(names)
        if len(history) > 20:
            past = history[-6] / history[-21] - 1.0
            signal = (past - past.mean()) / past.std()
        returns = (
            loading * rng.normal(0.0005, 0.01)
            + gamma * signal
            + rng.normal(0.0, 1.0, names) * noise
        )
        closes = history[-1] * (1.0 + returns)
        traded = volume * rng.uniform(0.5, 1.5, names)
        for index, symbol in enumerate(symbols):
            out[symbol].append(
                _bar(symbol, day, float(history[-1][index]), float(closes[index]), traded[index])
            )
        history.append(closes)
    return tuple((symbol, tuple(bars)) for symbol, bars in out.items())
