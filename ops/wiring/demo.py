"""`openbell demo`: replay the bundled data in all three markets with every baseline, then rank.

This module owns the demo's setup: its config, built as an object (the three markets replaying
every bar file bundled with openbell for them, `source = "bundled"`, each allowed outside its
universe's coverage and with partial data, with a warning; every baseline agent enrolled in every
market), a fresh SQLite ledger (an existing file at the path is replaced), one `replay_from_config`
run per market over a window that suits the bundled data (each replay's report, with its coverage
and warnings, handed to the caller), and the resulting leaderboards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from openbell.daemon.replay import ReplayReport
from openbell.ops.config.schema import (
    BaselineAgentConfig,
    LogConfig,
    MarketConfig,
    MarketsConfig,
    OpenbellConfig,
    RandomAgentConfig,
    StoreConfig,
)
from openbell.ops.reports.market_reports import Leaderboard, leaderboard
from openbell.ops.wiring.planning import replay_from_config
from openbell.store.db import make_engine
from openbell.store.migrate import upgrade

DEFAULT_DB = Path("var/demo.db")


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoMarket:
    """How the demo runs one market: cadence, replay window (inclusive dates), universe, cash."""

    market: str
    cadence: str
    start: date
    end: date
    universe: str
    initial_cash: str


#: Windows inside the bundled data. US hourly bars cover 2025-10-01..2025-11-10; A-share daily bars
#: 2025-01-02..2025-11-19, and the demo starts a session later: A-share orders need the previous
#: close (price limits), which the first bundled session lacks; crypto daily bars reach back to
#: 2010 (so the SMA(200) baseline has its history from the first slot) and up to 2025-12-26: the
#: demo replays the year to 2025-11-30. The A-share and crypto windows start before the dates
#: their universe files vouch for (sse50 from 2025-09-30, crypto10 from 2025-11-01): the demo
#: replays them anyway (`allow_outside_coverage`), and the replay warns about it on stderr. The
#: bundled SSE-50 index bars end on 2025-11-07, eight sessions before the A-share window ends: the
#: demo replays it anyway (`allow_partial_coverage`, the benchmark held at its last bar), with a
#: warning too.
DEMO_MARKETS: tuple[DemoMarket, ...] = (
    DemoMarket(
        market="us",
        cadence="hourly",
        start=date(2025, 10, 1),
        end=date(2025, 11, 10),
        universe="nasdaq100",
        initial_cash="10000",
    ),
    DemoMarket(
        market="cn",
        cadence="daily",
        start=date(2025, 1, 3),
        end=date(2025, 11, 19),
        universe="sse50",
        initial_cash="100000",
    ),
    DemoMarket(
        market="crypto",
        cadence="daily",
        start=date(2024, 12, 1),
        end=date(2025, 11, 30),
        universe="crypto10",
        initial_cash="10000",
    ),
)

#: Every baseline agent (the random trader seeded), each enrolled in every demo market.
BASELINES: tuple[tuple[str, str], ...] = (
    ("buy-and-hold", "buy_and_hold"),
    ("equal-weight", "equal_weight"),
    ("sma-crossover", "sma_crossover"),
    ("cash", "cash"),
    ("random", "random"),
)
RANDOM_SEED = 7


def demo_config(db_path: Path, markets: Sequence[DemoMarket]) -> OpenbellConfig:
    """The demo's config: the SQLite ledger at `db_path`, each market replaying every bar file
    bundled for it (`source = "bundled"`), allowed outside its universe's coverage and with
    partial data, every baseline enrolled in every market."""
    enrolled = tuple(spec.market for spec in markets)
    agents: list[BaselineAgentConfig | RandomAgentConfig] = [
        RandomAgentConfig(name=name, kind="random", markets=enrolled, seed=RANDOM_SEED)
        if kind == "random"
        else BaselineAgentConfig(name=name, kind=kind, markets=enrolled)
        for name, kind in BASELINES
    ]
    return OpenbellConfig(
        store=StoreConfig(url=f"sqlite:///{db_path.resolve().as_posix()}"),
        log=LogConfig(format="console", level="warning"),
        markets=MarketsConfig(
            **{
                spec.market: MarketConfig(
                    universe=spec.universe,
                    cadence=spec.cadence,
                    source="bundled",
                    initial_cash=spec.initial_cash,
                    allow_outside_coverage=True,
                    allow_partial_coverage=True,
                )
                for spec in markets
            }
        ),
        agents=tuple(agents),
    )


def reset_sqlite(db_path: Path) -> bool:
    """Delete the SQLite file at `db_path` and its WAL files; True if one existed."""
    existed = db_path.exists()
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    return existed


def run_demo(
    db_path: Path,
    markets: Sequence[DemoMarket] = DEMO_MARKETS,
    *,
    on_market: Callable[[DemoMarket], None] | None = None,
    on_replayed: Callable[[DemoMarket, ReplayReport], None] | None = None,
) -> list[Leaderboard]:
    """Replay each of `markets` into a fresh ledger at `db_path`; return their leaderboards.

    Any existing file at `db_path` is replaced. `on_market` is called before each market's
    replay (for progress lines), `on_replayed` after it with its report (its summary states the
    universe's coverage and the replay's warnings).
    """
    db_path.parent.mkdir(parents=True, exist_ok=True)
    reset_sqlite(db_path)
    config = demo_config(db_path, markets)
    upgrade(config.store.url)
    for spec in markets:
        if on_market is not None:
            on_market(spec)
        report = replay_from_config(
            config,
            start=spec.start,
            end=spec.end,
            market=spec.market,
            resume=False,
            show_progress=False,
        )
        if on_replayed is not None:
            on_replayed(spec, report)
    engine = make_engine(config.store.url)
    try:
        return [leaderboard(engine, spec.market) for spec in markets]
    finally:
        engine.dispose()
