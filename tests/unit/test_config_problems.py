"""A config with several problems lists every one of them, one line each naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from openbell.markets.errors import InvalidConfig
from openbell.ops.config.schema import load_config

MARKETS = """\
[markets.us]
universe = "nasdaq100"
cadence = "daily"
source = "yfinance"
initial_cash = "10000"

[markets.cn]
universe = "sse50"
cadence = "daily"
source = "akshare"
initial_cash = "100000"
"""


def problems_of(tmp_path: Path, text: str) -> tuple[Path, tuple[str, ...]]:
    path = tmp_path / "openbell.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidConfig) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message  # the exception's own text stays one line (logs, other callers)
    problems = caught.value.problems
    assert message.startswith(problems[0])
    for line in problems:
        assert "\n" not in line
        assert line.startswith(f"{path}: ")
    return path, problems


def test_every_field_problem_is_listed(tmp_path: Path) -> None:
    text = (
        '[store]\nurll = "sqlite:///x.db"\n\n'
        + MARKETS.replace('cadence = "daily"', 'cadence = "weekly"', 1).replace(
            'initial_cash = "100000"', "initial_cash = 100000.5"
        )
        + '\n[[agents]]\nname = "bad name!"\nkind = "cash"\nmarkets = ["us"]\n'
        + '\n[[agents]]\nname = "rnd"\nkind = "random"\nmarkets = ["us"]\nseed = "seven"\n'
    )
    path, problems = problems_of(tmp_path, text)
    assert len(problems) == 5, problems
    keys = ["store.urll", "markets.us.cadence", "markets.cn.initial_cash", "agents[0].name"]
    keys.append("agents[1].seed")
    for key in keys:
        assert sum(line.startswith(f"{path}: {key}: ") for line in problems) == 1, (key, problems)
    assert "did you mean 'url'" in next(line for line in problems if "store.urll" in line)


def test_every_cross_key_problem_is_listed(tmp_path: Path) -> None:
    agents = (
        '\n[[agents]]\nname = "cash"\nkind = "cash"\nmarkets = ["us", "crypto"]\n'
        '\n[[agents]]\nname = "cash"\nkind = "cash"\nmarkets = ["cn"]\n'
        '\n[[agents]]\nname = "hold"\nkind = "buy_and_hold"\nmarkets = ["us", "crypto"]\n'
    )
    path, problems = problems_of(tmp_path, MARKETS + agents)
    not_configured = "market 'crypto' is not configured (no [markets.crypto] section)"
    assert problems == (
        f"{path}: agents[0].markets[1]: {not_configured}",
        f"{path}: agents[1].name: agent 'cash' is defined twice",
        f"{path}: agents[2].markets[1]: {not_configured}",
    )


def test_every_universe_problem_is_listed(tmp_path: Path) -> None:
    text = MARKETS.replace('"sse50"', '"nosuch"').replace('"nasdaq100"', '"sse50"')
    path, problems = problems_of(tmp_path, text)
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"{path}: markets.us.universe: 'sse50' is a universe of the 'cn'")
    assert problems[1].startswith(f"{path}: markets.cn.universe: ")
    assert "nosuch" in problems[1]


def test_one_problem_is_one_line(tmp_path: Path) -> None:
    path, problems = problems_of(tmp_path, MARKETS.replace('"daily"', '"weekly"', 1))
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}: markets.us.cadence: ")
