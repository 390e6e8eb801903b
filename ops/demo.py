"""`openbell demo`: replay the bundled data in all three markets with every baseline, then rank.

This module owns the demo's setup: a config in a temporary directory (the three markets replaying
the bars bundled with openbell, each market's files copied into its own folder so that a
`replay:PATH` source sees only them, each allowed outside its universe's coverage with a warning;
every baseline agent enrolled in every market), a fresh SQLite
ledger (an existing file at the path is replaced), one `replay_from_config` run per market over a
window that suits the bundled data, and the resulting leaderboards.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path

from openbell.markets.barfile import bundled_names
from openbell.ops.config import load_config
from openbell.ops.replaying import replay_from_config
from openbell.ops.reports import Leaderboard, leaderboard
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
#: replays them anyway (`allow_outside_coverage`), and the replay warns about it on stderr.
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

#: Every baseline, by name and kind, with its extra config lines.
BASELINES: tuple[tuple[str, str, str], ...] = (
    ("buy-and-hold", "buy_and_hold", ""),
    ("equal-weight", "equal_weight", ""),
    ("sma-crossover", "sma_crossover", ""),
    ("cash", "cash", ""),
    ("random", "random", "seed = 7\n"),
)


def copy_bundled_bars(market: str, folder: Path) -> Path:
    """Copy the bar files bundled for `market` into `folder` (created); return `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    bars = resources.files("openbell.markets").joinpath("data", "bars")
    for name in bundled_names():
        if name.startswith(f"{market}-"):
            with resources.as_file(bars.joinpath(f"{name}.parquet")) as path:
                shutil.copyfile(path, folder / f"{name}.parquet")
    return folder


def demo_config_text(db_path: Path, bars_root: Path, markets: Sequence[DemoMarket]) -> str:
    """The demo's TOML: the SQLite ledger, each market replaying its folder, every baseline."""
    lines = [
        "[store]",
        f'url = "sqlite:///{db_path.resolve().as_posix()}"',
        "",
        "[log]",
        'format = "console"',
        'level = "warning"',
        "",
    ]
    for spec in markets:
        lines += [
            f"[markets.{spec.market}]",
            f'universe = "{spec.universe}"',
            f'cadence = "{spec.cadence}"',
            f'source = "replay:{(bars_root / spec.market).resolve().as_posix()}"',
            f'initial_cash = "{spec.initial_cash}"',
            "allow_outside_coverage = true",
            "",
        ]
    enrolled = ", ".join(f'"{spec.market}"' for spec in markets)
    for name, kind, extra in BASELINES:
        lines += [
            "[[agents]]",
            f'name = "{name}"',
            f'kind = "{kind}"',
            f"markets = [{enrolled}]",
        ]
        lines += [extra] if extra else [""]
    return "\n".join(lines)


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
) -> list[Leaderboard]:
    """Replay each of `markets` into a fresh ledger at `db_path`; return their leaderboards.

    Any existing file at `db_path` is replaced. `on_market` is called before each market's
    replay (for progress lines).
    """
    db_path.parent.mkdir(parents=True, exist_ok=True)
    reset_sqlite(db_path)
    with tempfile.TemporaryDirectory(prefix="openbell-demo-") as temp:
        root = Path(temp)
        for spec in markets:
            copy_bundled_bars(spec.market, root / "bars" / spec.market)
        config_path = root / "openbell.toml"
        config_path.write_text(demo_config_text(db_path, root / "bars", markets), "utf-8")
        config = load_config(config_path)
        upgrade(config.store.url)
        for spec in markets:
            if on_market is not None:
                on_market(spec)
            replay_from_config(
                config,
                start=spec.start,
                end=spec.end,
                market=spec.market,
                resume=False,
                show_progress=False,
            )
        engine = make_engine(config.store.url)
        try:
            return [leaderboard(engine, spec.market) for spec in markets]
        finally:
            engine.dispose()
