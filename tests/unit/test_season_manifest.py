"""A season's manifest (issue 26, item 1): canonical, hashed, built from the config's meaning
(not its text), naming the fields where a config differs; the code version read from git's files;
and the methods card's Markdown inert against hostile text (item 3)."""

from __future__ import annotations

import hashlib
import json
from datetime import date
from pathlib import Path

import pytest

from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import load_config_text
from openbell.ops.seasons.card import CardSection, CardTable, MethodsCard, to_markdown
from openbell.ops.seasons.code_version import CodeVersion, git_head
from openbell.ops.seasons.manifest import (
    build_manifest,
    canonical_json,
    manifest_differences,
    manifest_sha256,
)

CONFIG = """
[store]
url = "sqlite:///ledger.db"

[markets.crypto]
universe = "crypto10"
cadence = "daily"
source = "ccxt:binance"
initial_cash = "10000"

[[agents]]
name = "hold"
kind = "buy_and_hold"
markets = ["crypto"]

[[agents]]
name = "trader"
kind = "llm"
markets = ["crypto"]
base_url = "http://127.0.0.1:9/v1"
model = "model-a"
api_key_env = "KEY"
max_usd_per_day = "5"
masking = "stock-blind"

[prices."model-a"]
in_per_mtok = "1"
out_per_mtok = "2"
"""
CODE = CodeVersion(version="1.0", commit="a" * 40)


def manifest(text: str = CONFIG, code: CodeVersion = CODE) -> dict[str, object]:
    config = load_config_text(text, shown="test", base=Path())
    return build_manifest(config, name="s1", start=date(2025, 11, 3), end=None, code=code)


def test_the_manifest_states_markets_universe_rules_agents_ranking_and_sources() -> None:
    found = json.loads(canonical_json(manifest()))
    crypto = found["markets"]["crypto"]
    assert crypto["universe"]["name"] == "crypto10"
    assert crypto["universe"]["members"] == len(crypto["universe"]["symbols"]) == 10
    assert crypto["universe"]["coverage"]["from_date"] == "2025-11-01"
    assert crypto["rules"]["fees"]["commission_bps"] == "10"
    assert crypto["data"]["source"] == "ccxt:binance"
    assert [f["file"] for f in crypto["data"]["replay_bar_files"]] == ["bundled:crypto-1d.parquet"]
    assert len(crypto["data"]["replay_bar_files"][0]["sha256"]) == 64
    trader = found["agents"]["trader"]
    assert (trader["model"], trader["mode"], trader["masking"]) == (
        "model-a",
        "open-research",
        "stock-blind",
    )
    # the [prices] table is folded into the agent, as it runs
    assert (trader["price_in_per_mtok"], trader["max_usd_per_day"]) == ("1", "5")
    assert found["ranking"]["metrics_convention"]["name"] == "openbell"
    assert found["code"] == {"package": "openbell", "version": "1.0", "commit": "a" * 40}


def test_the_hash_is_of_the_meaning_not_the_text() -> None:
    first = canonical_json(manifest())
    reworded = CONFIG.replace('initial_cash = "10000"', 'initial_cash = "10000"  # ten thousand')
    again = canonical_json(manifest(reworded))
    assert first == again
    assert manifest_sha256(first) == manifest_sha256(again)
    other = canonical_json(manifest(CONFIG.replace('"10000"', '"20000"')))
    assert manifest_sha256(other) != manifest_sha256(first)


def test_differences_name_every_changed_field_and_leave_the_code_out() -> None:
    changed = CONFIG.replace('model = "model-a"', 'model = "model-b"').replace(
        '[[agents]]\nname = "hold"',
        '[markets.crypto.costs]\nslippage_bps = "7"\n\n[[agents]]\nname = "hold"',
    )
    changed = changed.replace('[prices."model-a"]', '[prices."model-b"]')
    lines = manifest_differences(
        manifest(), manifest(changed, CodeVersion(version="2.0", commit="unknown"))
    )
    assert any(line.startswith("agents.trader.model: ") and '"model-b"' in line for line in lines)
    assert any(line.startswith("markets.crypto.rules.slippage_bps: ") for line in lines)
    assert not any(line.startswith("code") for line in lines)
    assert (
        manifest_differences(manifest(), manifest(code=CodeVersion(version="2", commit="b"))) == []
    )


def test_git_head_reads_a_worktree_and_its_packed_branch(tmp_path: Path) -> None:
    common = tmp_path / "repo" / ".git"
    worktree = common / "worktrees" / "wt"
    worktree.mkdir(parents=True)
    (worktree / "HEAD").write_text("ref: refs/heads/topic\n")
    (worktree / "commondir").write_text("../..\n")
    (common / "packed-refs").write_text(f"# pack-refs\n{'b' * 40} refs/heads/topic\n")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / ".git").write_text(f"gitdir: {worktree}\n")
    assert git_head(checkout) == "b" * 40
    (common / "refs" / "heads").mkdir(parents=True)
    (common / "refs" / "heads" / "topic").write_text("c" * 40 + "\n")
    assert git_head(checkout) == "c" * 40
    assert git_head(tmp_path) is None


def test_the_cards_markdown_keeps_hostile_text_inert() -> None:
    hostile = "<script>alert(1)</script> | [x](javascript:y) `z`\n# heading"
    card = MethodsCard(
        season="s1",
        manifest_sha256="0" * 64,
        sections=(
            CardSection(
                title="Models as answered",
                lines=(hostile,),
                tables=(CardTable(headers=("answered as",), rows=((hostile,),)),),
            ),
        ),
    )
    text = to_markdown(card)
    assert "<script>" not in text
    assert "](" not in text.replace("\\](", "")
    table_rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert all(line.count(" | ") == 0 for line in table_rows)  # one column: no unescaped pipe
    assert "\n# heading" not in text


def test_a_replay_source_pins_each_bar_file_by_its_sha256(tmp_path: Path) -> None:
    folder = tmp_path / "bars"
    folder.mkdir()
    (folder / "crypto-1d.parquet").write_bytes(b"bars of a test")
    text = CONFIG.replace('source = "ccxt:binance"', f'source = "replay:{folder},bundled"')
    data = manifest(text)["markets"]["crypto"]["data"]  # type: ignore[index]
    files = data["replay_bar_files"]
    assert data["live"] is False
    assert files[0] == {
        "file": str(folder / "crypto-1d.parquet"),
        "sha256": hashlib.sha256(b"bars of a test").hexdigest(),
    }
    assert files[1]["file"] == "bundled:crypto-1d.parquet"
    missing = CONFIG.replace('source = "ccxt:binance"', f'source = "replay:{folder / "x.parquet"}"')
    with pytest.raises(ConfigError, match=r"x\.parquet does not exist"):
        manifest(missing)
