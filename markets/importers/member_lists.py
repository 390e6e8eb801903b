"""An index's published member list recorded in a universe file, point-in-time.

This module owns what `openbell data import-universe` and `openbell data download-universe` do
with a member list once it is read (from a saved CSIndex sheet, or live through the akshare
adapter): merge it into the universe file at a path (`markets.universe_files.merge_universe`:
the first list starts the file, each later one dates who joined and who left) and say what
changed. The indexes CSIndex publishes lists of, and the index each is measured against, are
data (`CSINDEX_INDEXES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from openbell.markets.calendars import calendar_for
from openbell.markets.universe_files import merge_universe, write_universe
from openbell.markets.universes import Universe, load_universe_file


@dataclass(frozen=True, slots=True, kw_only=True)
class CsindexIndex:
    """An index whose members CSIndex publishes: the universe's `name`, CSIndex's `code` and the
    index's own symbol, the universe's `benchmark`."""

    name: str
    code: str
    benchmark: str


#: The indexes `--index` names, by universe name.
CSINDEX_INDEXES: Final = {
    index.name: index
    for index in (
        CsindexIndex(name="csi300", code="000300", benchmark="000300.SH"),
        CsindexIndex(name="sse50", code="000016", benchmark="000016.SH"),
        CsindexIndex(name="csi500", code="000905", benchmark="000905.SH"),
    )
}

_COMMENT: Final = """\
{title}: a universe file of openbell, grown by `openbell data import-universe` and
`openbell data download-universe` from the member lists the index's publisher put out (see
docs/guide/csi300.md). Each list is merged in as published: a member joins on the first list that
names it and leaves on the first list that lacks it. Vendor data: do not commit it where its terms
forbid it; edit no date by hand."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedList:
    """What recording a list did: the universe file's content after it, and the members that
    joined and left with it (empty for the first list, or one already recorded)."""

    universe: Universe
    joined: tuple[str, ...]
    left: tuple[str, ...]

    def summary(self) -> str:
        """One line: `csi300: list of 2025-11-28, 300 members (2 joined, 2 left); covers
        2025-06-16..2025-12-15 (excluded)`."""
        universe = self.universe
        members = len(universe.members_on(universe.as_of))
        line = f"{universe.name}: list of {universe.as_of}, {members} members"
        if self.joined or self.left:
            line += f" ({len(self.joined)} joined, {len(self.left)} left)"
        coverage = universe.coverage
        if coverage is not None:
            line += f"; covers {coverage.describe()}"
        return line


def record_member_list(path: Path, published: Universe) -> RecordedList:
    """Merge `published` into the universe file at `path` (made when it does not exist); a list
    that cannot be merged raises `ValueError` and leaves the file as it was."""
    held = load_universe_file(path) if path.exists() else None
    merged = merge_universe(held, published, calendar_for("XSHG"))
    before = set() if held is None else set(held.members_on(held.as_of))
    after = set(merged.members_on(merged.as_of))
    if merged != held:
        title = f"{merged.name} ({merged.benchmark or merged.market})"
        write_universe(path, merged, comment=_COMMENT.format(title=title))
    return RecordedList(
        universe=merged,
        joined=tuple(sorted(after - before)) if held is not None else (),
        left=tuple(sorted(before - after)),
    )
