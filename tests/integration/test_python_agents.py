"""A Python plug-in agent trades in a replay like any agent: the docs' momentum example
(examples/momentum.py, shown in docs/how-to/bring-your-own-agent.md as it is) is loaded by
`openbell replay` from its `entry`, built with its `options`, and fills orders through the toolbox
on the bundled crypto bars; `ledger verify` then passes. A plug-in that cannot be loaded stops the
replay with one error line naming the agent and its entry."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openbell.ops.cli import main
from openbell_testkit.live import query
from openbell_testkit.logs import logging_restored

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "momentum.py"

pytestmark = pytest.mark.sqlite_only


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    with logging_restored():
        yield


@pytest.fixture
def examples_on_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))
    yield
    sys.modules.pop("momentum", None)


def config(tmp_path: Path, url: str, agent: str) -> Path:
    path = tmp_path / "openbell.toml"
    path.write_text(
        f'[store]\nurl = "{url}"\n\n[log]\nformat = "json"\n\n'
        '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "bundled"\n'
        'initial_cash = "10000"\n\n' + agent,
        encoding="utf-8",
    )
    return path


MOMENTUM = """
[[agents]]
name = "momentum"
kind = "python"
entry = "momentum:Momentum"
markets = ["crypto"]
options = { lookback = 5, top = 2 }
"""


def replay(path: Path) -> int:
    return main(["replay", "--config", str(path), "--start", "2025-11-03", "--end", "2025-11-16"])


def test_the_readme_example_trades_in_a_replay_and_the_ledger_verifies(
    tmp_path: Path, sqlite_url: str, examples_on_path: None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path, sqlite_url, MOMENTUM)

    assert replay(path) == 0, capsys.readouterr().err

    [(kind,)] = query(sqlite_url, "SELECT kind FROM agent WHERE name = 'momentum'")
    assert kind == "momentum"
    statuses = query(sqlite_url, "SELECT status, count(*) FROM cycle GROUP BY status")
    assert statuses == [("done", 14)]
    fills = query(
        sqlite_url,
        'SELECT o.side, o.reason FROM fill f JOIN "order" o ON o.id = f.order_id ORDER BY f.id',
    )
    assert {side for side, _ in fills} == {"buy", "sell"}
    assert all(re.fullmatch(r"up \d+\.\d\d% in 5 bars|faded", reason) for _, reason in fills)
    capsys.readouterr()
    assert main(["ledger", "verify", "--config", str(path)]) == 0
    assert "ok" in capsys.readouterr().out.lower()


def test_the_docs_show_the_example_as_it_is() -> None:
    page = (ROOT / "docs" / "how-to" / "bring-your-own-agent.md").read_text(encoding="utf-8")
    section = page.split("## Python plug-in agents", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert blocks, "the section shows the example"
    assert blocks[0] == EXAMPLE.read_text(encoding="utf-8")


def test_a_plugin_that_cannot_load_stops_the_replay_with_one_line(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path, sqlite_url, MOMENTUM.replace("momentum:Momentum", "nowhere:Momentum"))

    assert replay(path) == 2

    errors = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("{")]
    assert errors == [
        (
            "openbell: error: agent 'momentum': entry 'nowhere:Momentum': no module named "
            "'nowhere' (is its directory on PYTHONPATH, or its package installed?)"
        )
    ]
