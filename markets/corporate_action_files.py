"""The corporate-actions file: recorded splits and cash dividends of one market, for replays.

This module owns the on-disk format a replay reads its actions from (a market's
`corporate_actions = "PATH"` config, or the files bundled under `markets/data/actions/`) and
`read_actions`, which turns one into a `RecordedActions` source. The format is CSV with a header
line and one action per row:

```
symbol,ex_date,kind,ratio,cash,source
AAPL,2020-08-31,split,4,,yahoo
600519.SH,2025-06-26,cash_dividend,,27.673,sse-announcement
```

`ex_date` is the exchange-local date of the first session trading ex; `kind` is `split` (with
`ratio`, shares after per share before) or `cash_dividend` (with `cash`, pre-tax per share in the
market's currency); `source` says where the row came from. Lines starting with `#` are comments.
Amounts are read as exact decimals. Any bad row raises `ConfigError` naming the file and line.
"""

from __future__ import annotations

import csv
import io
from datetime import date
from decimal import Decimal, InvalidOperation
from importlib import resources
from pathlib import Path
from typing import Final

from openbell.markets.calendars import TradingCalendar, calendar_for
from openbell.markets.corporate_actions import ActionKind, CorporateAction, RecordedActions
from openbell.markets.errors import ConfigError
from openbell.markets.rules import rules_for

COLUMNS: Final = ("symbol", "ex_date", "kind", "ratio", "cash", "source")


def _decimal(text: str, name: str, where: str) -> Decimal:
    if not text.strip():
        return Decimal(1) if name == "ratio" else Decimal(0)
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ConfigError(f"{where}: {name} {text!r} is not a decimal number") from None
    if not value.is_finite():
        raise ConfigError(f"{where}: {name} {text!r} is not a finite number")
    return value


def _row_action(
    row: dict[str, str], where: str, currency: str, calendar: TradingCalendar
) -> CorporateAction:
    try:
        ex_date = date.fromisoformat(row["ex_date"].strip())
    except ValueError:
        raise ConfigError(f"{where}: ex_date {row['ex_date']!r} is not YYYY-MM-DD") from None
    try:
        kind = ActionKind(row["kind"].strip())
    except ValueError:
        known = ", ".join(kind.value for kind in ActionKind)
        raise ConfigError(f"{where}: kind {row['kind']!r} is not one of {known}") from None
    if not calendar.is_session(ex_date):
        raise ConfigError(f"{where}: ex_date {ex_date} is not a {calendar.calendar_id} session")
    try:
        return CorporateAction(
            symbol=row["symbol"].strip(),
            kind=kind,
            ex_date=ex_date,
            ex_at=calendar.session_open(ex_date),
            currency=currency,
            source=row["source"].strip() or "file",
            ratio=_decimal(row["ratio"], "ratio", where),
            cash=_decimal(row["cash"], "cash", where),
        )
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def parse_actions(text: str, market: str, *, origin: str) -> RecordedActions:
    """The actions of `market` in the CSV `text`; `origin` names it in errors and is the source's
    name."""
    rules = rules_for(market)
    calendar = calendar_for(rules.calendar_id)
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        found = ",".join(reader.fieldnames or [])
        raise ConfigError(f"{origin}: the header must be {','.join(COLUMNS)}, got {found}")
    actions = []
    for number, row in enumerate(reader, start=2):
        if None in row or any(value is None for value in row.values()):
            raise ConfigError(f"{origin}, row {number}: expected {len(COLUMNS)} fields")
        actions.append(_row_action(row, f"{origin}, row {number}", rules.currency, calendar))
    try:
        return RecordedActions(market=market, actions=actions, name=origin)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def read_actions(path: str | Path, market: str) -> RecordedActions:
    """The actions file at `path` for `market`; a missing or bad file raises `ConfigError`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read corporate actions file {path}: {exc.strerror}") from None
    return parse_actions(text, market, origin=f"file:{path}")


def bundled_actions(market: str) -> RecordedActions | None:
    """The actions bundled with openbell for `market` (`markets/data/actions/<market>.csv`), or
    None when none are bundled."""
    resource = resources.files("openbell.markets").joinpath("data", "actions", f"{market}.csv")
    if not resource.is_file():
        return None
    return parse_actions(
        resource.read_text(encoding="utf-8"), market, origin=f"bundled:{market}.csv"
    )
