"""A masked agent's key cannot be rebuilt from openbell's source and its account id: without a
configured `masking_seed`, `openbell replay` draws the key from a secret seed, so two ledgers get
different aliases for the same account; a configured seed makes the key reproducible (an operator's
choice, with the config kept from the agents)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from openbell.agents.aliases import derive_key
from openbell.markets.universes import load_universe
from openbell_testkit.cli import openbell
from openbell_testkit.llm import ScriptedModel, finish, serve_script

#: Fresh `openbell` processes, never forked from a zygote:
#: a seed drawn by each process from its own entropy.
pytestmark = pytest.mark.fresh_processes


def replayed_aliases(folder: Path, seed_line: str) -> dict[str, str]:
    """Replay one blinded LLM agent for a day into a fresh ledger; the stored aliases."""
    folder.mkdir()
    db = folder / "ledger.db"
    with serve_script(ScriptedModel([finish()] * 5)) as base_url:
        (folder / "openbell.toml").write_text(
            f'[store]\nurl = "sqlite:///{db}"\n\n[log]\nformat = "console"\nlevel = "warning"\n\n'
            '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
            'initial_cash = "1000000"\n\n'
            '[[agents]]\nname = "blind"\nkind = "llm"\nmarkets = ["cn"]\n'
            f'base_url = "{base_url}"\nmodel = "scripted-1"\nmasking = "blinded"\n{seed_line}',
            encoding="utf-8",
        )
        done = openbell(folder, "replay", "--start", "2025-10-09", "--end", "2025-10-09")
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT symbol, alias FROM masking_alias").fetchall()
    assert rows
    return dict(rows)


def test_without_a_seed_the_key_is_secret_and_with_one_it_is_reproducible(tmp_path: Path) -> None:
    universe = load_universe("sse50")
    public = {seed: dict(derive_key(universe, account_id=1, seed=seed).aliases) for seed in (0, 7)}
    first = replayed_aliases(tmp_path / "a", "")
    second = replayed_aliases(tmp_path / "b", "")
    assert first != public[0], "the key is the old default seed's, which anyone can rebuild"
    assert first != second, "two runs drew the same key: the seed is not secret"
    assert set(first) == set(second) == set(public[0])
    seeded = replayed_aliases(tmp_path / "c", "masking_seed = 7\n")
    assert seeded == public[7]
