"""CSIndex member lists into a universe file: the recorded CSI 300 sheet read from a file (as a
user saves it) and fetched live through the akshare adapter (akshare's own code behind a fake
`requests.get`), merged point in time, list after list.

The second list is the recorded sheet with a one-line edit (a later date, one member replaced):
CSIndex's sheet as it would look after a change.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import akshare
import openpyxl
import pytest
import requests

from openbell.markets.adapters.akshare import AkshareSource
from openbell.markets.adapters.akshare.sheets import read_member_list
from openbell.markets.errors import SourceFormatError
from openbell.markets.importers.member_lists import CSINDEX_INDEXES, record_member_list
from openbell.markets.universes import load_universe
from openbell_testkit.offline import refuse_network, sync

SHEET = Path(__file__).parents[1] / "resources" / "vendors" / "eastmoney" / "000300cons.xlsx"
CSI300 = CSINDEX_INDEXES["csi300"]
MEMBERS = ("600519.SH", "000001.SZ", "300750.SZ", "688981.SH")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_network(monkeypatch, with_curl=True)


@dataclass
class Sheet:
    """What akshare reads of CSIndex's answer: the sheet's bytes."""

    content: bytes
    status_code: int = 200


def later_sheet(tmp_path: Path, day: str, replaced: tuple[int, int], name: str) -> Path:
    """The recorded sheet published on `day` (YYYYMMDD) with the member on data row
    `replaced[0]` replaced by code `replaced[1]` named `name`."""
    book = openpyxl.load_workbook(SHEET)
    sheet = book.active
    assert sheet is not None
    for row in range(2, sheet.max_row + 1):
        sheet.cell(row=row, column=1).value = int(day)
    row = replaced[0] + 2
    sheet.cell(row=row, column=5).value = replaced[1]
    sheet.cell(row=row, column=6).value = name
    path = tmp_path / f"000300cons-{day}.xlsx"
    book.save(path)
    return path


def test_the_recorded_sheet_is_the_csi300_of_its_day() -> None:
    found = read_member_list(SHEET, name="csi300", benchmark="000300.SH", index="000300")
    assert found.symbols == MEMBERS
    assert found.as_of == date(2025, 11, 28)
    assert found.benchmark == "000300.SH"
    assert found.instrument("000001.SZ").name == "平安银行"
    with pytest.raises(SourceFormatError, match="lists members of 000300, not 000016"):
        read_member_list(SHEET, name="sse50", index="000016")


def test_akshares_frame_saved_as_csv_reads_the_same(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(requests, "get", lambda url, **_: Sheet(SHEET.read_bytes()))
    frame = akshare.index_stock_cons_csindex(symbol="000300")
    frame.to_csv(tmp_path / "csi300.csv")
    saved = read_member_list(tmp_path / "csi300.csv", name="csi300", benchmark="000300.SH")
    assert saved == read_member_list(SHEET, name="csi300", benchmark="000300.SH")


def test_a_file_of_another_shape_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bars.csv").write_text("symbol,time,open\n600519.SH,2025-11-28,1\n")
    with pytest.raises(SourceFormatError, match="not an index_stock_cons_csindex frame"):
        read_member_list(tmp_path / "bars.csv", name="csi300")
    (tmp_path / "short.xlsx").write_bytes(b"not a workbook")
    with pytest.raises(SourceFormatError, match="not a CSIndex member list"):
        read_member_list(tmp_path / "short.xlsx", name="csi300")


def test_imported_lists_grow_the_file_point_in_time(tmp_path: Path) -> None:
    path = tmp_path / "universes" / "csi300.toml"
    first = record_member_list(
        path, read_member_list(SHEET, name="csi300", benchmark="000300.SH", index="000300")
    )
    assert (first.joined, first.left) == ((), ())
    assert first.summary() == (
        "csi300: list of 2025-11-28, 4 members; covers from 2025-11-28 until 2025-12-15 (excluded)"
    )
    later = later_sheet(tmp_path, "20251216", (3, 601899), "紫金矿业")
    second = record_member_list(
        path, read_member_list(later, name="csi300", benchmark="000300.SH", index="000300")
    )
    assert (second.joined, second.left) == (("601899.SH",), ("688981.SH",))
    universe = load_universe(str(path))
    assert universe == second.universe
    assert universe.members_on(date(2025, 12, 15)) == MEMBERS
    assert universe.members_on(date(2025, 12, 16)) == (*MEMBERS[:3], "601899.SH")
    assert universe.coverage is not None
    assert universe.coverage.until_date == date(2026, 6, 15)
    # an older list is refused and the file is left as it was
    text = path.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="older than the file's last list"):
        record_member_list(path, read_member_list(SHEET, name="csi300", benchmark="000300.SH"))
    assert path.read_text(encoding="utf-8") == text


@sync
async def test_a_list_fetched_through_the_adapter_starts_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    asked: list[str] = []

    def get(url: str, **_: Any) -> Sheet:
        asked.append(url.rsplit("/", 1)[-1])
        return Sheet(SHEET.read_bytes())

    monkeypatch.setattr(requests, "get", get)

    async def no_wait(seconds: float) -> None:
        return None

    source = AkshareSource(
        now=lambda: datetime(2025, 11, 28, 8, tzinfo=UTC), sleep=no_wait, min_interval_s=0.0
    )
    published = await source.index_members(CSI300.code, name=CSI300.name, benchmark="000300.SH")
    recorded = record_member_list(tmp_path / "csi300.toml", published)
    assert asked == ["000300cons.xls"]
    assert recorded.universe.symbols == MEMBERS
    assert recorded.universe.benchmark == "000300.SH"
    assert load_universe(str(tmp_path / "csi300.toml")) == recorded.universe
