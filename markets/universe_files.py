"""Universe files a user keeps: dated member lists of an index, grown one observation at a time.

This module owns turning an index's published member list (a `Universe` without coverage, as the
akshare adapter parses CSIndex's sheet: the members on the day it was published) into a universe
file (the format of `markets.universes`) and merging each later list into it, point-in-time:

- The first list, published on day D, vouches for its members from D until the index's next
  scheduled review takes effect (`next_review`: CSIndex reviews the CSI 300, the SSE 50 and the
  CSI 500 every June and December, effective from the session after the second Friday), so its
  coverage is `[D, review)`. Its members carry no dates of their own.
- A later list, published on day E, extends the coverage to `[first D, the review after E)`. A
  member on it that the file did not hold joins `from = E`; a member of the file's last list
  that it lacks leaves `until = E`. A change is dated on the first list that shows it, never
  earlier: an agent at a date never sees a member before a published list named it (nothing
  from the future), at the price of a change being as late as the list that first shows it (a
  list fetched right after each review dates the scheduled changes exactly).
- A list older than the file's last one is refused; a list of the same day must be the same
  list. A member that left and comes back is refused too: a file holds one membership period
  per symbol, and inventing a second is not done.

`render_universe` writes the TOML text (its `parse_universe` reading gives the same `Universe`
back); `write_universe` writes a file atomically.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path
from typing import Final

from openbell.markets.calendars import TradingCalendar
from openbell.markets.errors import CalendarOutOfRange
from openbell.markets.universes import Period, Universe

#: The months of CSIndex's periodic reviews (June and December).
REVIEW_MONTHS: Final = (6, 12)
_FRIDAY: Final = 4


def _second_friday(year: int, month: int) -> date:
    first = date(year, month, 1)
    return first + timedelta(days=(_FRIDAY - first.weekday()) % 7 + 7)


def next_review(day: date, calendar: TradingCalendar) -> date:
    """The first day after `day` on which a periodic review of a CSIndex index takes effect: the
    session after the second Friday of June or December (the Monday after it, where `calendar`
    does not know that far)."""
    for year in (day.year, day.year + 1):
        for month in REVIEW_MONTHS:
            friday = _second_friday(year, month)
            try:
                effective = calendar.next_session(friday)
            except CalendarOutOfRange:
                effective = friday + timedelta(days=3)
            if effective > day:
                return effective
    raise AssertionError("unreachable: a review falls within any twelve months")


def _coverage(first: date, last: date, until: date) -> Period:
    lists = f"of {first}" if first == last else f"of {first} to {last}"
    return Period(
        from_date=first,
        until_date=until,
        source=(
            f"the index's published member lists {lists}; vouched for until the periodic review "
            f"after the last ({until}); a change is dated on the first list that shows it"
        ),
    )


def start_universe(published: Universe, calendar: TradingCalendar) -> Universe:
    """The universe file's content for a first member list `published`."""
    day = published.as_of
    return replace(
        published,
        coverage=_coverage(day, day, next_review(day, calendar)),
        memberships={},
    )


def merge_universe(
    held: Universe | None, published: Universe, calendar: TradingCalendar
) -> Universe:
    """`held` (a universe file's content, None for none yet) with the member list `published`
    merged in, as the module docstring says; `ValueError` for a list that cannot be merged."""
    if held is None:
        return start_universe(published, calendar)
    if held.coverage is None:
        raise ValueError(f"universe {held.name} has no coverage: it is not a member-list file")
    if (held.name, held.market) != (published.name, published.market):
        raise ValueError(
            f"a {published.market} list of {published.name} cannot be merged into universe "
            f"{held.name} of the {held.market} market"
        )
    day = published.as_of
    current = set(held.members_on(held.as_of))
    listed = set(published.symbols)
    if day < held.as_of:
        raise ValueError(
            f"the list of {day} is older than the file's last list ({held.as_of}); "
            "a universe file grows forward only"
        )
    if day == held.as_of:
        if listed != current:
            raise ValueError(f"the list of {day} differs from the file's list of that same day")
        return held
    returning = sorted((listed - current) & set(held.symbols))
    if returning:
        raise ValueError(
            f"{', '.join(returning)} left universe {held.name} and are back on the list of {day}; "
            "a universe file holds one membership period per symbol"
        )
    memberships = dict(held.memberships)
    seen = f"first missing from the list published {day}"
    for symbol in sorted(current - listed):
        before = memberships.get(symbol, Period())
        memberships[symbol] = Period(from_date=before.from_date, until_date=day, source=seen)
    joiners = [i for i in published.instruments if i.symbol not in current]
    for instrument in joiners:
        memberships[instrument.symbol] = Period(
            from_date=day, source=f"first on the list published {day}"
        )
    return replace(
        held,
        as_of=day,
        source=published.source or held.source,
        benchmark=published.benchmark or held.benchmark,
        instruments=(*held.instruments, *joiners),
        weights_pct={},
        coverage=_coverage(held.coverage.from_date or day, day, next_review(day, calendar)),
        memberships=memberships,
    )


def _string(text: str) -> str:
    """`text` as a TOML basic string."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _member_line(universe: Universe, symbol: str) -> str:
    instrument = universe.instrument(symbol)
    fields = [f"symbol = {_string(symbol)}"]
    if instrument.name:
        fields.append(f"name = {_string(instrument.name)}")
    if instrument.is_st:
        fields.append("is_st = true")
    if symbol in universe.weights_pct:
        fields.append(f"weight_pct = {_string(str(universe.weights_pct[symbol]))}")
    membership = universe.memberships.get(symbol)
    if membership is not None:
        if membership.from_date is not None:
            fields.append(f"from = {membership.from_date.isoformat()}")
        if membership.until_date is not None:
            fields.append(f"until = {membership.until_date.isoformat()}")
        fields.append(f"dates_source = {_string(membership.source)}")
    return "    { " + ", ".join(fields) + " },"


def render_universe(universe: Universe, *, comment: str = "") -> str:
    """`universe` as a universe file's TOML text, `comment` (lines) at its head."""
    lines = [f"# {line}".rstrip() for line in comment.splitlines()]
    lines += [f"name = {_string(universe.name)}", f"market = {_string(universe.market)}"]
    lines.append(f"as_of = {universe.as_of.isoformat()}")
    if universe.benchmark is not None:
        lines.append(f"benchmark = {_string(universe.benchmark)}")
    if universe.source:
        lines.append(f"source = {_string(universe.source)}")
    lines.append("instruments = [")
    lines += [_member_line(universe, symbol) for symbol in universe.symbols]
    lines.append("]")
    coverage = universe.coverage
    if coverage is not None:
        lines += ["", "[coverage]"]
        if coverage.from_date is not None:
            lines.append(f"from = {coverage.from_date.isoformat()}")
        if coverage.until_date is not None:
            lines.append(f"until = {coverage.until_date.isoformat()}")
        lines.append(f"source = {_string(coverage.source)}")
    return "\n".join(lines) + "\n"


def write_universe(path: Path, universe: Universe, *, comment: str = "") -> None:
    """Write `universe` to `path` (its folder made if needed), atomically: a reader sees the old
    file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(render_universe(universe, comment=comment))
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
