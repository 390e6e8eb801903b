"""`openbell replay` of the factor-model baseline on the bundled A-shares, then the leaderboard.

The real console script replays the SSE-50 window the universe file vouches for (2025-09-30 ..
2025-11-19, 31 sessions; the model reads its training history from the bundled bars before it)
with `kind = "factor_model"` beside buy-and-hold and cash into a fresh SQLite file: the factor
model trades, holds at most `top_k` stocks, ranks on the leaderboard with a cycle per session,
and the ledger verifies. A second replay into another file ends with the same NAV (seeded,
deterministic training).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openbell_testkit.cli import openbell

START, END = "2025-09-30", "2025-11-19"
SESSIONS = 31
TOP_K = 4

CONFIG = """
[store]
url = "sqlite:///{db}"

[markets.cn]
universe = "sse50"
cadence = "daily"
source = "bundled"
initial_cash = "1000000"
allow_partial_coverage = true  # the SSE-50 index's bundled bars end on 2025-11-07

[[agents]]
name = "lgbm"
kind = "factor_model"
markets = ["cn"]
top_k = {top_k}
retrain_sessions = 10
train_sessions = 40
label_sessions = 5
seed = 11

[[agents]]
name = "buy-and-hold"
kind = "buy_and_hold"
markets = ["cn"]

[[agents]]
name = "cash"
kind = "cash"
markets = ["cn"]
"""


def replay(workdir: Path, name: str) -> Path:
    config = workdir / f"{name}.toml"
    config.write_text(CONFIG.format(db=(workdir / f"{name}.db").as_posix(), top_k=TOP_K))
    result = openbell(
        workdir,
        *("replay", "--config", str(config), "--start", START, "--end", END, "--no-progress"),
    )
    assert result.returncode == 0, result.stderr
    assert f"{SESSIONS} slots" in result.stdout
    return config


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    workdir = tmp_path_factory.mktemp("factor")
    return workdir, replay(workdir, "first")


def board(workdir: Path, config: Path) -> dict[str, object]:
    result = openbell(workdir, "leaderboard", "--config", str(config), "-f", "json")
    assert result.returncode == 0, result.stderr
    boards = json.loads(result.stdout)["leaderboards"]
    assert len(boards) == 1
    found: dict[str, object] = boards[0]
    return found


def test_the_factor_model_trades_and_ranks(replayed: tuple[Path, Path]) -> None:
    rows = {row["name"]: row for row in board(*replayed)["rows"]}  # type: ignore[attr-defined]
    model = rows["lgbm"]
    assert isinstance(model["rank"], int)
    assert model["cycles"] == SESSIONS
    assert model["trades"] > TOP_K  # it bought its first top k, then turned over
    assert model["cumulative_return"] != rows["cash"]["cumulative_return"]
    assert {row["rank"] for row in rows.values() if not row["is_benchmark"]} == {1, 2, 3}


def test_it_never_holds_more_than_top_k(replayed: tuple[Path, Path]) -> None:
    workdir, config = replayed
    result = openbell(
        workdir, "positions", "--agent", "lgbm", "--config", str(config), "-f", "json"
    )
    assert result.returncode == 0, result.stderr
    (account,) = json.loads(result.stdout)["accounts"]
    held = [p for p in account["positions"] if float(p["quantity"]) > 0]
    assert 1 <= len(held) <= TOP_K


def test_the_ledger_verifies_and_a_second_replay_ends_the_same(
    replayed: tuple[Path, Path],
) -> None:
    workdir, config = replayed
    verified = openbell(workdir, "ledger", "verify", "--config", str(config))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    again = replay(workdir, "second")
    first = {row["name"]: row for row in board(workdir, config)["rows"]}  # type: ignore[attr-defined]
    second = {row["name"]: row for row in board(workdir, again)["rows"]}  # type: ignore[attr-defined]
    assert first["lgbm"]["final_nav"] == second["lgbm"]["final_nav"]
