"""A season's archive end to end: a replay with baselines and two scripted LLM agents (over real
local HTTP servers), exported by `openbell season export` (SQLite and Postgres), verified from its
files alone, its figures equal to the live leaderboard's; a copy with one byte of one fill price,
one slot NAV, one close NAV or one model answer changed, or with a row added or removed, fails and
names the row."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from openbell.agents.baselines import build_agent
from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.recorder import Prices
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.ops.cli.app import main
from openbell.ops.reports.market_reports import leaderboards
from openbell.ops.seasons.archive.export import export_archive
from openbell.ops.seasons.archive.figures import PANEL_FIGURES, published_figures
from openbell.ops.seasons.archive.verify import verify_archive
from openbell.store.db import make_engine
from openbell.store.migrate import upgrade
from openbell_testkit.archives import archive_rows, flip_byte
from openbell_testkit.llm import ScriptedModel, self_correcting_trader, serve_script
from openbell_testkit.replay import cn_daily

SESSIONS = 5  # 2025-09-01 .. 2025-09-05


def _agent(name: str, base_url: str) -> LlmAgent:
    return LlmAgent(
        name=name,
        client=ChatClient(ClientConfig(base_url=base_url, model="gpt-test", api_key="sk-x")),
        prices=Prices(in_per_mtok=Decimal(1), out_per_mtok=Decimal(2)),
    )


@dataclass(frozen=True)
class Season:
    url: str
    archive: Path
    board: list[dict[str, Any]]  # `leaderboard --format json`'s records, from the live ledger


@pytest.fixture
def season(db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Season:
    upgrade(db_url)
    first = ScriptedModel([self_correcting_trader] * 40)
    second = ScriptedModel([self_correcting_trader] * 40)
    with serve_script(first) as first_url, serve_script(second) as second_url:
        done = run_replay(
            ReplayPlan(
                store_url=db_url,
                start_at=utc(2025, 9, 1),
                end_at=utc(2025, 9, 6),
                markets=(
                    cn_daily(
                        _agent("trader-a", first_url),
                        _agent("trader-b", second_url),
                        build_agent("buy_and_hold", "buy-and-hold", market="cn"),
                        build_agent("equal_weight", "equal-weight", market="cn"),
                    ),
                ),
            )
        )
    assert done.cycles_done == 4 * SESSIONS
    archive = tmp_path / "archive"
    assert main(["season", "export", "s1", str(archive), "--db", db_url]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--format", "json", "--db", db_url]) == 0
    board = json.loads(capsys.readouterr().out)["leaderboards"]
    return Season(url=db_url, archive=archive, board=board)


def _copy(season: Season, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(season.archive, copy)
    return copy


def test_an_untouched_archive_verifies_and_its_figures_are_the_leaderboards(
    season: Season, tmp_path: Path
) -> None:
    verdict = verify_archive(season.archive)
    assert verdict.mismatch is None
    assert verdict.accounts == 4
    assert verdict.links == 4 * SESSIONS
    heads = json.loads((season.archive / "heads.json").read_text())
    assert [head["seq"] for head in heads["heads"]] == [SESSIONS] * 4
    manifest = json.loads((season.archive / "manifest.json").read_text())
    assert sorted(account["agent"] for account in manifest["accounts"]) == [
        "buy-and-hold",
        "equal-weight",
        "trader-a",
        "trader-b",
    ]
    # The figures recomputed from the Parquet rows are the live `leaderboard --format json`'s.
    (board,) = season.board
    ours = verdict.figures[board["market"]]
    assert ours["periods_per_year"] == board["periods_per_year"]
    assert ours["cadence"] == board["cadence"]
    live = {row["agent"]: row for row in board["rows"] if row["agent"] is not None}
    assert sorted(ours["rows"]) == sorted(live)
    for agent, row in live.items():
        for key in ("final_nav", *[k for k in PANEL_FIGURES if k != "periods"]):
            assert ours["rows"][agent][key] == row[key], (agent, key)
    assert any(row["cumulative_return"] for row in live.values()), "a season that moved"
    # The same from the command line, with no database named.
    assert main(["season", "verify", str(season.archive)]) == 0


def test_an_edited_published_figure_is_caught(season: Season, tmp_path: Path) -> None:
    copy = _copy(season, tmp_path)
    figures = json.loads((copy / "figures.json").read_text())
    row = figures["cn"]["rows"]["trader-a"]
    row["sharpe_ratio"] = (row["sharpe_ratio"] or 0.0) + 0.5
    (copy / "figures.json").write_text(json.dumps(figures))
    found = _mismatch(copy)
    assert found.table == "figures.json"
    assert "trader-a" in found.detail
    assert "sharpe_ratio" in found.detail


def _mismatch(archive: Path) -> Any:
    verdict = verify_archive(archive)
    assert verdict.mismatch is not None
    assert main(["season", "verify", str(archive)]) == 1
    return verdict.mismatch


def test_one_byte_of_one_fill_price_is_caught_and_named(season: Season, tmp_path: Path) -> None:
    copy = _copy(season, tmp_path)
    fills = archive_rows(copy, "fill").to_pylist()
    assert fills
    index = len(fills) // 2
    row = flip_byte(copy, "fill", "price", index)
    found = _mismatch(copy)
    assert (found.table, found.row_id, found.account_id) == (
        "fill",
        str(row["id"]),
        row["account_id"],
    )
    assert found.slot_at is not None


def test_one_byte_of_one_slot_nav_is_caught_and_named(season: Season, tmp_path: Path) -> None:
    copy = _copy(season, tmp_path)
    snapshots = archive_rows(copy, "nav_snapshot").to_pylist()
    index = next(i for i, row in enumerate(snapshots) if row["kind"] == "slot" and i > 3)
    row = flip_byte(copy, "nav_snapshot", "nav", index)
    found = _mismatch(copy)
    assert (found.table, found.row_id, found.account_id) == (
        "nav_snapshot",
        str(row["id"]),
        row["account_id"],
    )
    assert found.slot_at == row["at"]


def test_one_byte_of_one_close_nav_is_caught_and_named(season: Season, tmp_path: Path) -> None:
    copy = _copy(season, tmp_path)
    snapshots = archive_rows(copy, "nav_snapshot").to_pylist()
    closes = [i for i, row in enumerate(snapshots) if row["kind"] == "close"]
    if not closes:
        pytest.skip("the replay wrote no close snapshot")
    row = flip_byte(copy, "nav_snapshot", "nav", closes[-1])
    found = _mismatch(copy)
    assert (found.table, found.row_id) == ("nav_snapshot", str(row["id"]))


def test_one_byte_of_one_model_answer_is_caught_and_named(season: Season, tmp_path: Path) -> None:
    copy = _copy(season, tmp_path)
    traces = archive_rows(copy, "trace").to_pylist()
    index = next(
        i for i, row in enumerate(traces) if row["role"] == "tool" and row["result"] and i > 5
    )
    row = flip_byte(copy, "trace", "result", index)
    found = _mismatch(copy)
    assert (found.table, found.row_id) == ("trace", str(row["id"]))
    assert found.agent in {"trader-a", "trader-b"}


def test_a_removed_order_and_an_edited_head_are_caught(season: Season, tmp_path: Path) -> None:
    copy = _copy(season, tmp_path)
    orders = archive_rows(copy, "order")
    removed = orders.slice(0, 1).to_pylist()[0]
    pq.write_table(orders.slice(1), copy / "tables" / "order.parquet")
    found = _mismatch(copy)
    assert (found.table, found.row_id) == ("order", str(removed["id"]))

    other = tmp_path / "other"
    shutil.copytree(season.archive, other)
    heads = json.loads((other / "heads.json").read_text())
    heads["heads"][0]["digest"] = "0" * 64
    (other / "heads.json").write_text(json.dumps(heads))
    found = _mismatch(other)
    assert found.table == "heads.json"
    assert found.account_id == heads["heads"][0]["account_id"]


def test_a_duplicated_row_is_caught_and_named(season: Season, tmp_path: Path) -> None:
    copy = _copy(season, tmp_path)
    fills = archive_rows(copy, "fill")
    twice = fills.slice(0, 1)
    pq.write_table(pa.concat_tables([fills, twice]), copy / "tables" / "fill.parquet")
    found = _mismatch(copy)
    assert (found.table, found.row_id) == ("fill", str(twice.to_pylist()[0]["id"]))


def test_figures_over_a_window_are_recomputed_over_it(season: Season, tmp_path: Path) -> None:
    """A board over a window (a season's dates) is published with it, and verify measures over
    the same window: the figures agree, and differ from the whole history's."""
    start, end = utc(2025, 9, 2), utc(2025, 9, 5)
    engine = make_engine(season.url)
    try:
        boards = leaderboards(engine, None, start, end)
        archive = tmp_path / "window"
        export_archive(
            engine,
            archive,
            name="window",
            manifest=b"{}",
            published=published_figures(boards),
            exported_at=utc(2026, 1, 1),
        )
    finally:
        engine.dispose()
    verdict = verify_archive(archive)
    assert verdict.mismatch is None
    windowed = verdict.figures["cn"]
    assert (windowed["start"], windowed["end"]) == (start.isoformat(), end.isoformat())
    whole = verify_archive(season.archive).figures["cn"]
    assert {row["periods"] for row in windowed["rows"].values()} != {
        row["periods"] for row in whole["rows"].values()
    }
    (board,) = boards
    for row in board.rows:
        if row.agent is not None:
            assert windowed["rows"][row.agent]["sharpe_ratio"] == row.panel.sharpe_ratio
