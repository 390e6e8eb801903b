"""`openbell data download`: a universe's history from a live vendor, into a replay folder.

This module owns the command's options and output: it builds the market's live adapter
(`yfinance`, `akshare` or `ccxt:EXCHANGE`, by `--source` or the market's default) on the wall
clock, runs `markets.importers.download.download` into `--out` with a progress bar on stderr,
and prints what the folder holds and the config lines that replay it. The vendor's network is
the only one it reaches; `OPENBELL_OFFLINE` refuses it. A download with pieces that failed
(the vendor away, rate-limited) says which, exits 75 (EX_TEMPFAIL: try again later), and the same
command run again fetches only what is missing.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from openbell.ops.cli.options import Market, ProgressOption

if TYPE_CHECKING:
    from openbell.markets.adapters.vendor_calls import Now
    from openbell.markets.importers.download import (
        DownloadReport,
        DownloadRequest,
        Progress,
        Vendor,
    )
    from openbell.markets.importers.download_folder import DownloadFolder

#: The exit code of a download with pieces left to fetch (sysexits' EX_TEMPFAIL).
EX_TEMPFAIL = 75
#: Each market's vendor when `--source` is not given.
DEFAULT_SOURCES = {"us": "yfinance", "cn": "akshare", "crypto": "ccxt:binance"}


def download_command(
    market: Annotated[Market, typer.Option("--market", "-m", help="The market.")],
    start: Annotated[
        datetime,
        typer.Option(
            "--start",
            formats=["%Y-%m-%d"],
            help="The window's first market-local day.",
            show_default=False,
        ),
    ],
    end: Annotated[
        datetime,
        typer.Option(
            "--end",
            formats=["%Y-%m-%d"],
            help="The window's last market-local day, included.",
            show_default=False,
        ),
    ],
    universe: Annotated[
        str | None,
        typer.Option(
            "--universe",
            help="A bundled universe (djia20, sse50, ...) or a universe file (PATH.toml).",
        ),
    ] = None,
    symbols: Annotated[
        str | None,
        typer.Option("--symbols", help="Symbols, comma-separated, beside or for a universe."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help='The folder; replay it with source = "replay:DIR". Default: var/data/UNIVERSE.',
            show_default=False,
        ),
    ] = None,
    interval: Annotated[str, typer.Option("--interval", help="1d or 1h bars.")] = "1d",
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="yfinance, akshare or ccxt:EXCHANGE; default: yfinance (us), akshare (cn), "
            "ccxt:binance (crypto).",
            show_default=False,
        ),
    ] = None,
    progress: ProgressOption = None,
) -> None:
    """Download a universe's bars, corporate actions, shares, news and (daily) fundamentals for a
    window from the market's live vendor into a replay folder.

    Daily bars are fetched from 53 weeks before --start (the 52-week range, the agents'
    look-back); fundamentals are StockBench's (market cap, dividend yield, last dividend, 52-week
    high and low), rebuilt for each session from dated facts only. Resumable: what the folder
    already holds is not fetched again. Exit 75 when a piece could not be fetched: run it again.
    """
    from openbell.daemon.clock import SystemClock
    from openbell.markets.errors import ConfigError
    from openbell.markets.importers.download import DownloadRequest
    from openbell.markets.importers.download_folder import DownloadFolder
    from openbell.markets.universes import load_universe
    from openbell.ops.logs.rendering import configure_logging
    from openbell.ops.wiring.planning import OFFLINE_ENV

    if os.environ.get(OFFLINE_ENV, "") not in ("", "0"):
        raise ConfigError(f"{OFFLINE_ENV} is set: data download reaches the vendor; unset it")
    wanted: list[str] = []
    named = market.value
    if universe is not None:
        found = load_universe(universe)
        named = found.name
        if found.market != market.value:
            raise ConfigError(f"universe {universe} is a {found.market} universe, not {market}")
        wanted += found.symbols
    wanted += [s.strip() for s in (symbols or "").split(",") if s.strip()]
    if not wanted:
        raise ConfigError("name what to download: --universe NAME and/or --symbols A,B,...")
    folder_path = out or Path("var/data") / named
    chosen = source or DEFAULT_SOURCES[market.value]
    configure_logging("console", "warning", sys.stderr)
    clock = SystemClock()
    try:
        request = DownloadRequest(
            market=market.value,
            symbols=tuple(dict.fromkeys(wanted)),
            interval=interval,
            first=start.date(),
            last=end.date(),
            now=clock.now(),
        )
    except ValueError as exc:
        raise ConfigError(f"data download: {exc}") from None
    vendor = _vendor(market.value, chosen, clock.now)
    shown = sys.stderr.isatty() if progress is None else progress
    with _progress_bar(shown) as update:
        report = asyncio.run(_run(vendor, request, DownloadFolder(folder_path), update))
    typer.echo(
        f"downloaded {len(request.symbols)} {market.value} symbols ({interval}, {chosen}) "
        f"{request.first}..{request.last} into {folder_path}"
    )
    for line in report.summary(len(request.symbols)):
        typer.echo(line)
    typer.echo(
        f'replay it with, in [markets.{market.value}]: source = "replay:{folder_path}"'
        + (
            f', corporate_actions = "{folder_path / "corporate_actions.csv"}"'
            if report.actions
            else ""
        )
    )
    if report.failed:
        typer.echo(
            f"openbell: error: data download: {len(report.failed)} pieces could not be fetched; "
            "run the same command again to fetch what is missing",
            err=True,
        )
        raise typer.Exit(EX_TEMPFAIL)


async def _run(
    vendor: Vendor, request: DownloadRequest, folder: DownloadFolder, update: Progress | None
) -> DownloadReport:
    """The download, the vendor's connections closed after it (ccxt's)."""
    from openbell.markets.importers.download import download

    try:
        if update is None:
            return await download(vendor, request, folder)
        return await download(vendor, request, folder, progress=update)
    finally:
        close = getattr(vendor, "close", None)
        if close is not None:
            await close()


def _vendor(market: str, source: str, now: Now) -> Vendor:
    """The live adapter `source` names for `market` (a `ConfigError` for a mismatch)."""
    from openbell.markets.errors import ConfigError

    kind, _, argument = source.partition(":")
    expected = {"yfinance": "us", "akshare": "cn", "ccxt": "crypto"}.get(kind)
    if expected is None:
        raise ConfigError(f"--source {source}: use yfinance, akshare or ccxt:EXCHANGE")
    if expected != market:
        raise ConfigError(f"--source {source} serves {expected}, not {market}")
    if kind == "yfinance":
        from openbell.markets.adapters.yfinance import YahooSource

        return YahooSource(now=now, threads=False)
    if kind == "akshare":
        from openbell.markets.adapters.akshare import AkshareSource

        return AkshareSource(now=now)
    from openbell.markets.adapters.ccxt import CcxtSource

    return CcxtSource.create(argument or "binance", now=now)


@contextmanager
def _progress_bar(show: bool) -> Iterator[Progress | None]:
    """A rich progress bar on stderr fed by `(done, total, what)`; None when not shown."""
    if not show:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (
        TextColumn("download"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("", total=None)

        def update(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=what)

        yield update
