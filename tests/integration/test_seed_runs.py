"""`replay --seeds N`: the agents of a config repeated per seed, and the runs recorded in the
ledger as one group, on real SQLite and Postgres."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from openbell.markets.domain import utc
from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import LlmAgentConfig, RandomAgentConfig, load_config
from openbell.ops.wiring.seeds import group_label, seed_runs_of, seeded_config
from openbell.store.ledger import Ledger
from openbell.store.seed_runs import SeedRun, record_seed_runs, seed_runs

CONFIG = """
[store]
url = "sqlite:///unused.db"

[markets.us]
universe = ["AAPL"]
cadence = "daily"
source = "bundled"
initial_cash = "10000"

[[agents]]
name = "rnd"
kind = "random"
markets = ["us"]
seed = 7

[[agents]]
name = "bh"
kind = "buy_and_hold"
markets = ["us"]

[[agents]]
name = "model"
kind = "llm"
markets = ["us"]
base_url = "http://127.0.0.1:9/v1"
model = "m"
temperature = 0.7
extra_body = { top_k = 5 }
"""


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "openbell.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def test_each_agent_runs_once_per_seed_with_its_seed(tmp_path: Path) -> None:
    seeded = seeded_config(load_config(_config(tmp_path)), 3)
    names = [agent.name for agent in seeded.agents]
    assert names == [f"{base}.seed{k}" for base in ("rnd", "bh", "model") for k in (1, 2, 3)]
    randoms = [a for a in seeded.agents if isinstance(a, RandomAgentConfig)]
    assert [a.seed for a in randoms] == [8, 9, 10]
    models = [a for a in seeded.agents if isinstance(a, LlmAgentConfig)]
    assert [a.extra_body for a in models] == [{"top_k": 5, "seed": k} for k in (1, 2, 3)]
    assert {a.temperature for a in models} == {0.7}
    assert [a.name for a in seeded.agents_in("us")] == names


def test_the_seed_count_is_bounded(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--seeds must be within 1\.\.100"):
        seeded_config(load_config(_config(tmp_path)), 0)


def test_runs_are_recorded_once_and_read_back(
    engine: Engine, ledger: Ledger, tmp_path: Path
) -> None:
    config = load_config(_config(tmp_path))
    label = group_label(date(2025, 8, 1), date(2025, 8, 14), 2)
    assert label == "2025-08-01..2025-08-14 x2"
    runs = seed_runs_of(config, 2, label)
    now = utc(2025, 8, 1) - timedelta(days=1)
    for run in runs[:4]:  # the LLM's runs never made an agent: they are not recorded
        ledger.ensure_agent(run.agent, "random", now)
    assert seed_runs(engine) == []
    assert record_seed_runs(engine, runs) == 4
    assert record_seed_runs(engine, runs) == 0  # idempotent
    found = seed_runs(engine)
    assert found == sorted(runs[:4], key=lambda r: (r.base_agent, r.seed))
    assert found[0] == SeedRun(agent="bh.seed1", group_label=label, base_agent="bh", seed=1)
