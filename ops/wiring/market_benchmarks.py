"""The benchmark each configured market is measured against, and the bars that price it.

This module owns reading a market's benchmark out of the config for the reports: the market's
`benchmark` key when it is set, else the `benchmark` of its bundled universe file (`000300.SH` for
`csi300`), else the market's default (`ops.evaluation.benchmark.benchmark_for`). A market whose
source is `replay:PATH[,PATH...]` also prices it (and the symbols its agents traded) from those
files, so an index imported with `openbell data import` (the CSI 300's bars, which openbell does not
bundle) gives the information ratio and the benchmark row of a replay on it. A market configured
with a list of symbols and no `benchmark` keeps the default.
"""

from __future__ import annotations

from openbell.markets.errors import ConfigError
from openbell.markets.universes import load_universe
from openbell.ops.config.schema import MarketConfig, OpenbellConfig
from openbell.ops.evaluation.benchmark import MarketBasis, benchmark_for


def benchmark_symbol(name: str, market: MarketConfig) -> str | None:
    """The configured benchmark of market `name`: its `benchmark`, else its universe file's
    (None: the market's default)."""
    if market.benchmark is not None:
        return market.benchmark
    if isinstance(market.universe, str):
        try:
            return load_universe(market.universe).benchmark
        except ConfigError:
            return None
    return None


def market_basis(name: str, market: MarketConfig) -> MarketBasis:
    """What market `name`'s reports measure against (see the module docstring)."""
    benchmark = benchmark_for(name, benchmark_symbol(name, market))
    if market.source_kind != "replay":
        return MarketBasis(benchmark=benchmark)
    from openbell.markets.replay_source import ReplaySource
    from openbell.ops.wiring.planning import replay_barsets

    files = ReplaySource(market=name, barsets=replay_barsets(name, market), name=market.source)
    return MarketBasis(benchmark=benchmark, sources=(files,))


def configured_bases(config: OpenbellConfig) -> dict[str, MarketBasis]:
    """The `MarketBasis` of each configured market, by name."""
    return {
        name: market_basis(name, market) for name, market in config.markets.configured().items()
    }
