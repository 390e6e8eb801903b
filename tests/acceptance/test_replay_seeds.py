"""`openbell replay --seeds 3` of the baselines, then the leaderboard's intervals over the seeds.

The real console script replays two weeks of A-share sessions with every baseline three times
into a fresh SQLite file; the leaderboard JSON must hold the group with each agent's mean and
interval over the three seeds and P(beat), the same figures as recomputed here from the rows of
the board (each seed's accounts ranked among themselves), and `--bootstrap` intervals around the
board's own figures.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from openbell_testkit.cli import BASELINE_KINDS, openbell, write_cn_baselines_config

START, END = "2025-08-01", "2025-08-14"
SESSIONS = 10  # XSHG sessions from 2025-08-01 through 2025-08-14


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    workdir = tmp_path_factory.mktemp("seeds")
    config = write_cn_baselines_config(
        workdir / "openbell.toml",
        f"sqlite:///{(workdir / 'seeds.db').as_posix()}",
        allow_partial_coverage=True,  # 601088.SH is suspended from 2025-08-04 through 08-15
    )
    result = openbell(
        workdir,
        *("replay", "--config", str(config), "--start", START, "--end", END),
        *("--seeds", "3", "--no-progress"),
    )
    assert result.returncode == 0, result.stderr
    return workdir, config


def _board(workdir: Path, config: Path, *extra: str) -> dict[str, object]:
    result = openbell(workdir, "leaderboard", "--config", str(config), "-f", "json", *extra)
    assert result.returncode == 0, result.stderr
    boards = json.loads(result.stdout)["leaderboards"]
    assert len(boards) == 1
    board: dict[str, object] = boards[0]
    return board


def test_every_agent_ran_once_per_seed(seeded: tuple[Path, Path]) -> None:
    board = _board(*seeded)
    rows = [row for row in board["rows"] if not row["is_benchmark"]]  # type: ignore[attr-defined]
    names = sorted(row["name"] for row in rows)
    assert names == sorted(f"{kind}.seed{k}" for kind in BASELINE_KINDS for k in (1, 2, 3))
    assert all(row["cycles"] == SESSIONS for row in rows)
    # the random trader's seeds differ, so its runs do; buy-and-hold's are equal
    returns = {row["name"]: row["cumulative_return"] for row in rows}
    assert len({returns[f"random.seed{k}"] for k in (1, 2, 3)}) == 3
    assert len({returns[f"buy_and_hold.seed{k}"] for k in (1, 2, 3)}) == 1


def test_the_group_shows_the_mean_and_interval_over_seeds(seeded: tuple[Path, Path]) -> None:
    board = _board(*seeded)
    groups = board["seed_groups"]
    assert isinstance(groups, list)
    assert len(groups) == 1
    group = groups[0]
    assert group["group_label"] == f"{START}..{END} x3"
    assert group["seeds"] == [1, 2, 3]
    rows = {row["name"]: row for row in board["rows"]}  # type: ignore[attr-defined]
    agents = {agent["agent"]: agent for agent in group["agents"]}
    assert sorted(agents) == sorted(BASELINE_KINDS)
    for kind, agent in agents.items():
        values = [rows[f"{kind}.seed{k}"]["cumulative_return"] for k in (1, 2, 3)]
        stat = agent["metrics"]["cumulative_return"]
        assert stat["runs"] == 3
        assert stat["mean"] == pytest.approx(statistics.fmean(values))
        assert stat["std"] == pytest.approx(statistics.stdev(values), abs=1e-15)
        assert stat["low"] <= stat["mean"] <= stat["high"]
        assert min(values) <= stat["low"]
        assert stat["high"] <= max(values)
    random = agents["random"]["metrics"]["cumulative_return"]
    assert random["low"] < random["high"]  # the seeds made a difference
    composite = {kind: agent["metrics"]["composite"]["mean"] for kind, agent in agents.items()}
    assert [agent["agent"] for agent in group["agents"]] == sorted(
        composite, key=lambda kind: -composite[kind]
    )
    p_beat = group["p_beat"]
    for a in BASELINE_KINDS:
        for b in BASELINE_KINDS:
            if a != b:
                assert p_beat[a][b] in (0.0, 1 / 3, 2 / 3, 1.0)
                assert p_beat[a][b] + p_beat[b][a] <= 1.0 + 1e-12


def test_the_bootstrap_brackets_the_boards_figures(seeded: tuple[Path, Path]) -> None:
    board = _board(*seeded, "--bootstrap", "200")
    found = board["bootstrap"]
    assert isinstance(found, dict)
    assert found["draws"] == 200
    assert found["periods"] == SESSIONS - 1
    assert found["block_length"] == 3  # ceil(9 ** (1/3))
    rows = {row["name"]: row for row in board["rows"]}  # type: ignore[attr-defined]
    for entry in found["rows"]:
        rank = entry["intervals"]["rank"]
        assert 1 <= rank["low"] <= rank["high"] <= len(BASELINE_KINDS) * 3
        drawdown = entry["intervals"]["max_drawdown"]
        assert drawdown["high"] <= 0.0
        assert drawdown["defined"] == 200
        assert rows[entry["name"]]["max_drawdown"] >= drawdown["low"]
    assert _board(*seeded)["bootstrap"] is None


def test_the_table_shows_the_group(seeded: tuple[Path, Path]) -> None:
    workdir, config = seeded
    result = openbell(workdir, "leaderboard", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert f"seeds group {START}..{END} x3" in result.stdout
    assert "P(beat) over the 3 seeds" in result.stdout


def test_the_api_and_the_arena_page_show_the_group(seeded: tuple[Path, Path]) -> None:
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from openbell.ops.web.api import api_routes
    from openbell.ops.web.pages import page_routes
    from openbell.ops.web.schemas import Leaderboard
    from openbell.store.db import make_engine

    workdir, _config = seeded
    engine = make_engine(f"sqlite:///{(workdir / 'seeds.db').as_posix()}")
    try:
        app = Starlette(routes=[*api_routes(engine), *page_routes(engine)])
        client = TestClient(app)
        document = client.get("/api/v1/leaderboard/cn").json()
        Leaderboard.model_validate(document)
        (group,) = document["seed_groups"]
        assert group["group_label"] == f"{START}..{END} x3"
        assert document["bootstrap"] is None
        page = client.get("/").text
        assert f"Seeds group {START}..{END} x3" in page
        first = group["agents"][0]["agent"]
        assert f'<tr data-name="{first}">' in page
    finally:
        engine.dispose()
