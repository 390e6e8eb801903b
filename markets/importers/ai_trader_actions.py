"""Derive the A-share cash dividends of the bundled window from AI-Trader's Tushare daily bars.

This module owns `derive_cn_dividends` and the bundled `markets/data/actions/cn.csv` it writes.
Tushare's `pro.daily` rows carry `pre_close`, the exchange's reference price for the session: the
previous close, except on an ex-date, where it is the ex-rights reference price
`(previous close - cash) / (1 + bonus ratio)`. A session whose `pre_close` is below the previous
session's close is therefore an ex-date, and for a cash dividend the difference is the dividend
per share, to the cent of the reference price (an approximation of the announced, four-decimal
amount). A drop of more than `MAX_DIVIDEND_SHARE` of the price cannot be told apart from a bonus
issue and is refused; a `pre_close` above the previous close (a rights issue, a data error) is
counted and skipped. Rows are read from the same files, in the same priority, as the `cn-1d`
bars (`ai_trader.OUTPUTS`).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Final

from openbell.markets.corporate_action_files import COLUMNS
from openbell.markets.errors import SourceFormatError
from openbell.markets.importers.ai_trader import COMMITS, REPO

#: The Tushare files of the `cn-1d` bars, in priority order (a later file only adds new rows).
CN_DAILY_FILES: Final = (
    ("81d570b", "data/A_stock/daily_prices_sse_50.csv"),
    ("c8b24a0", "data/A_stock/A_stock_data/daily_prices_sse_50.csv"),
)
#: A larger drop of the reference price than this share of the close is not read as a dividend.
MAX_DIVIDEND_SHARE: Final = Decimal("0.15")
SOURCE: Final = "tushare-pre_close"
_COLUMNS: Final = ("ts_code", "trade_date", "close", "pre_close")


@dataclass(frozen=True, slots=True)
class DerivedDividend:
    """A cash dividend read off the reference price: `cash` per share, ex on `ex_date`."""

    symbol: str
    ex_date: date
    cash: Decimal
    previous_close: Decimal
    pre_close: Decimal


def _rows(paths: Sequence[Path]) -> dict[str, dict[date, tuple[Decimal, Decimal]]]:
    """(close, pre_close) by symbol and session; an earlier file wins a (symbol, date) pair."""
    out: dict[str, dict[date, tuple[Decimal, Decimal]]] = {}
    for path in paths:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [name for name in _COLUMNS if name not in (reader.fieldnames or ())]
            if missing:
                raise SourceFormatError(f"{path}: missing columns {missing}")
            for row in reader:
                day = date.fromisoformat(row["trade_date"])
                found = out.setdefault(row["ts_code"], {})
                found.setdefault(day, (Decimal(row["close"]), Decimal(row["pre_close"])))
    return out


def derive_cn_dividends(paths: Sequence[Path]) -> tuple[list[DerivedDividend], Counter[str]]:
    """The cash dividends the `pre_close` of the Tushare files at `paths` reveal, by (ex-date,
    symbol), and the count of sessions skipped by reason."""
    skipped: Counter[str] = Counter()
    found: list[DerivedDividend] = []
    for symbol, days in sorted(_rows(paths).items()):
        ordered = sorted(days.items())
        for (_, (previous, _)), (day, (_, reference)) in itertools.pairwise(ordered):
            if reference == previous:
                continue
            if reference > previous:
                skipped["pre_close_above_previous_close"] += 1
                continue
            cash = previous - reference
            if cash > previous * MAX_DIVIDEND_SHARE:
                raise SourceFormatError(
                    f"{symbol} on {day}: the reference price fell {cash} from {previous}; "
                    "that is not a plain cash dividend (a bonus issue?), derive it by hand"
                )
            found.append(DerivedDividend(symbol, day, cash, previous, reference))
    found.sort(key=lambda dividend: (dividend.ex_date, dividend.symbol))
    return found, skipped


def render(dividends: Sequence[DerivedDividend], provenance: Sequence[str]) -> str:
    """The actions file (`corporate_action_files.py` format) of `dividends`, with a header."""
    lines = [
        "# A-share cash dividends of the SSE-50 members in the bundled cn-1d window, derived by",
        "# openbell.markets.importers.ai_trader_actions: cash = previous close - Tushare pre_close",
        "# (the exchange's ex-date reference price), to the cent. See PROVENANCE.md.",
        *(f"# from {source}" for source in provenance),
        ",".join(COLUMNS),
    ]
    lines.extend(
        f"{d.symbol},{d.ex_date.isoformat()},cash_dividend,,{d.cash},{SOURCE}" for d in dividends
    )
    return "\n".join(lines) + "\n"


def build_cn_actions(source_dir: Path, out_file: Path) -> tuple[int, Counter[str]]:
    """Derive the dividends from the AI-Trader copy under `source_dir` and write `out_file`."""
    paths = []
    provenance = []
    for commit, relative in CN_DAILY_FILES:
        path = source_dir / commit / relative
        if not path.is_file():
            raise SourceFormatError(f"{path}: not found")
        paths.append(path)
        provenance.append(f"{REPO}@{COMMITS[commit]}:{relative}")
    dividends, skipped = derive_cn_dividends(paths)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(render(dividends, provenance), encoding="utf-8")
    return len(dividends), skipped


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m openbell.markets.importers.ai_trader_actions SOURCE_DIR OUT_FILE`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("source_dir", type=Path, help="the AI-Trader copy (folders per commit)")
    parser.add_argument("out_file", type=Path, help="the actions file to write (cn.csv)")
    args = parser.parse_args(argv)
    written, skipped = build_cn_actions(args.source_dir, args.out_file)
    detail = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items())) or "none"
    print(f"{written} cash dividends written to {args.out_file}; skipped: {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
