"""The real `openbell demo`: three markets replayed from the bundled data, three leaderboards."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

TIMEOUT_S = 300


def openbell_command() -> list[str]:
    script = shutil.which("openbell", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "openbell.ops.cli"]


def test_demo_prints_three_leaderboards_with_a_benchmark_row(tmp_path: Path) -> None:
    db = tmp_path / "var" / "demo.db"
    db.parent.mkdir()
    db.write_bytes(b"an old demo ledger")  # replaced, not reused
    # A short window (the same for every market) keeps the test quick; the defaults run longer.
    result = subprocess.run(
        [
            *openbell_command(),
            "demo",
            "--db",
            str(db),
            "--start",
            "2025-10-01",
            "--end",
            "2025-10-10",
            "--format",
            "json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "replacing the existing demo ledger" in result.stderr
    assert result.stderr.splitlines()[-1].strip() == f"openbell leaderboard --db {db}"
    # Every market's replay states its universe's coverage, complete or not (issue 15, item 6).
    assert [line for line in result.stderr.splitlines() if line.startswith("coverage:")] == [
        (
            "coverage: markets.us nasdaq100 101/101 members, benchmark QQQ covered, "
            "8 sessions 2025-10-01..2025-10-10"
        ),
        (
            "coverage: markets.cn sse50 50/50 members, benchmark 000016.SH covered, "
            "2 sessions 2025-10-09..2025-10-10"
        ),
        "coverage: markets.crypto crypto10 10/10 members, 10 sessions 2025-10-01..2025-10-10",
    ]
    boards = json.loads(result.stdout)["leaderboards"]
    assert [board["market"] for board in boards] == ["us", "cn", "crypto"]
    assert [board["benchmark"] for board in boards] == ["QQQ", "000016.SH", "CD5"]
    for board in boards:
        agents = {row["agent"] for row in board["rows"] if not row["is_benchmark"]}
        assert agents == {"buy-and-hold", "equal-weight", "sma-crossover", "cash", "random"}
        (bench,) = [row for row in board["rows"] if row["is_benchmark"]]
        assert bench["rank"] is None
        assert bench["periods"] > 0
        assert bench["cumulative_return"] is not None
        cash = next(row for row in board["rows"] if row["agent"] == "cash")
        assert cash["cumulative_return"] == 0.0
    assert db.stat().st_size > 0
