"""`openbell data import-universe` and `openbell data download-universe`: an index's member
lists into a universe file.

This module owns the two commands' options and output. Both merge one published member list of a
CSIndex index (`--index csi300`, `sse50` or `csi500`) into the universe file at `--out` (default
`var/data/universes/INDEX.toml`; `universe = "PATH"` in a market's config reads it), through
`markets.importers.member_lists`: `import-universe` reads a list the user saved (CSIndex's sheet,
or akshare's frame as CSV), `download-universe` fetches today's through the akshare adapter on the
wall clock (the vendor's network is the only one it reaches; `OPENBELL_OFFLINE` refuses it). Each
prints what the list changed and the config line that uses the file.
"""

from __future__ import annotations

import asyncio
import os
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from openbell.markets.universes import Universe


class Index(StrEnum):
    """Values of `--index` (`markets.importers.member_lists.CSINDEX_INDEXES`)."""

    csi300 = "csi300"
    sse50 = "sse50"
    csi500 = "csi500"


IndexOption = Annotated[
    Index, typer.Option("--index", help="The index: csi300 (000300.SH), sse50 or csi500.")
]
OutOption = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help='The universe file; use it with universe = "PATH". Default: '
        "var/data/universes/INDEX.toml.",
        show_default=False,
    ),
]


def import_universe_command(
    source: Annotated[
        Path,
        typer.Argument(
            help="A CSIndex member list: the index's sheet (000300cons.xls or .xlsx) or akshare's "
            "index_stock_cons_csindex frame saved as CSV.",
            exists=True,
            dir_okay=False,
        ),
    ],
    index: IndexOption,
    out: OutOption = None,
) -> None:
    """Merge a saved member list of an index into its universe file (made on the first list).

    A member joins on the first list that names it and leaves on the first that lacks it; the
    file vouches for its members from its first list until the periodic review after its last.
    Lists go in in date order: an older list than the file's last is refused.
    """
    from openbell.markets.adapters.akshare.sheets import read_member_list
    from openbell.markets.importers.member_lists import CSINDEX_INDEXES

    found = CSINDEX_INDEXES[index.value]
    published = read_member_list(
        source, name=found.name, benchmark=found.benchmark, index=found.code
    )
    _record(published, out or _default_path(index))


def download_universe_command(index: IndexOption, out: OutOption = None) -> None:
    """Fetch an index's member list as CSIndex publishes it today (through akshare) and merge it
    into its universe file (made on the first list).

    CSIndex publishes today's list only: run it after each June and December review (or daily)
    so that each change is dated when it took effect; a list is never dated in the past.
    """
    from openbell.daemon.clock import SystemClock
    from openbell.markets.adapters.akshare import AkshareSource
    from openbell.markets.errors import ConfigError
    from openbell.markets.importers.member_lists import CSINDEX_INDEXES
    from openbell.ops.wiring.planning import OFFLINE_ENV

    if os.environ.get(OFFLINE_ENV, "") not in ("", "0"):
        raise ConfigError(
            f"{OFFLINE_ENV} is set: data download-universe reaches the vendor; unset it"
        )
    found = CSINDEX_INDEXES[index.value]
    source = AkshareSource(now=SystemClock().now)
    published = asyncio.run(
        source.index_members(found.code, name=found.name, benchmark=found.benchmark)
    )
    _record(published, out or _default_path(index))


def _default_path(index: Index) -> Path:
    return Path("var/data/universes") / f"{index.value}.toml"


def _record(published: Universe, path: Path) -> None:
    """Merge `published` into the file at `path` and say what changed."""
    from openbell.markets.errors import ConfigError
    from openbell.markets.importers.member_lists import record_member_list

    try:
        recorded = record_member_list(path, published)
    except ValueError as exc:
        raise ConfigError(f"universe file {path}: {exc}") from None
    typer.echo(recorded.summary())
    if recorded.joined:
        typer.echo(f"joined: {', '.join(recorded.joined)}")
    if recorded.left:
        typer.echo(f"left: {', '.join(recorded.left)}")
    typer.echo(f"wrote {path}")
    typer.echo(f'use it with, in [markets.{published.market}]: universe = "{path}"')
