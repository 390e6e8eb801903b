"""CSIndex member lists saved as files: what `openbell data import-universe` reads.

This module owns reading a member list a user saved: CSIndex's own sheet (`000300cons.xls`, from
the index's page on csindex.com.cn, or the same sheet as `.xlsx`), read exactly as akshare 1.19's
`index_stock_cons_csindex` reads the bytes it downloads (its nine columns renamed by position,
`日期` from `YYYYMMDD`, codes zero-padded), or that function's frame saved with `to_csv` (its
Chinese column names, `日期` as `YYYY-MM-DD`). Either becomes the frame `parse.parse_members` turns
into a `Universe`. A file in neither shape is refused as a `SourceFormatError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pandas as pd

from openbell.markets.adapters.akshare.parse import parse_members
from openbell.markets.errors import SourceFormatError
from openbell.markets.universes import Universe

#: The columns of akshare's `index_stock_cons_csindex` frame, in CSIndex's order.
MEMBER_COLUMNS: Final = (
    "日期",
    "指数代码",
    "指数名称",
    "指数英文名称",
    "成分券代码",
    "成分券名称",
    "成分券英文名称",
    "交易所",
    "交易所英文名称",
)
_SHEETS: Final = (".xls", ".xlsx")


def _sheet(path: Path) -> pd.DataFrame:
    """CSIndex's sheet as akshare's `index_stock_cons_csindex` makes it a frame."""
    frame = pd.read_excel(path)
    if len(frame.columns) != len(MEMBER_COLUMNS):
        raise SourceFormatError(
            f"{path.name}: a CSIndex member sheet has {len(MEMBER_COLUMNS)} columns "
            f"(Date, Index Code, ..., Exchange), this one {len(frame.columns)}"
        )
    frame.columns = list(MEMBER_COLUMNS)
    # as text: pandas 3 would read an integer with a format as an epoch
    dates = frame["日期"].astype(str).str.strip()
    frame["日期"] = pd.to_datetime(dates, format="%Y%m%d", errors="coerce").dt.date
    frame["指数代码"] = frame["指数代码"].astype(str).str.zfill(6)
    frame["成分券代码"] = frame["成分券代码"].astype(str).str.zfill(6)
    return frame


def _saved_frame(path: Path) -> pd.DataFrame:
    """akshare's frame saved with `to_csv` (an index column, if saved, is ignored)."""
    frame = pd.read_csv(path, dtype=str, encoding="utf-8-sig")
    missing = [name for name in MEMBER_COLUMNS if name not in frame.columns]
    if missing:
        raise SourceFormatError(
            f"{path.name}: not an index_stock_cons_csindex frame: no column {', '.join(missing)}"
        )
    frame["成分券代码"] = frame["成分券代码"].str.strip().str.zfill(6)
    return frame


def read_member_list(
    path: Path, *, name: str, benchmark: str | None = None, index: str | None = None
) -> Universe:
    """The member list in the file at `path` as a `Universe` named `name` with `benchmark`, dated
    by its publication date. `index` (CSIndex's code, `000300`), when given, must be the list's:
    the CSI 300's sheet is not imported as the SSE 50 by mistake."""
    try:
        frame = _sheet(path) if path.suffix.lower() in _SHEETS else _saved_frame(path)
    except SourceFormatError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise SourceFormatError(f"{path.name}: not a CSIndex member list ({exc})") from exc
    codes = sorted({str(code).strip().zfill(6) for code in frame["指数代码"].dropna()})
    if index is not None and codes != [index]:
        raise SourceFormatError(f"{path.name}: lists members of {', '.join(codes)}, not {index}")
    found = parse_members(frame, name, benchmark)
    if found is None:
        raise SourceFormatError(f"{path.name}: no member with a code, an exchange and a date")
    return found
