"""Seasons and their methods card through the real CLI (issue 26, items 1 and 3), on SQLite and
Postgres.

A crypto replay season of four daily slots: a buy-and-hold baseline, an LLM agent against a
scripted model on 127.0.0.1 (priced, with a daily dollar cap), and an outside (MCP) agent that
never connects, so each of its cycles is skipped as `agent_absent`. `season open` records the
manifest's hash; `replay --season` runs it from the config stored with the season; the
leaderboard, the JSON API and the arena page name that hash; a changed config is refused while
the season is open, naming the changed field; the card states the ledger's own counts (skips,
fills, exchanges, spend); a replay season re-runs in a fresh ledger from the manifest, with the
same hash and the same board.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlmodel import col
from starlette.applications import Starlette
from starlette.testclient import TestClient

from openbell.ops.web.api import api_routes
from openbell.ops.web.pages import page_routes
from openbell.store.db import make_engine
from openbell.store.tables import (
    AccountRow,
    AgentRow,
    CycleDigestRow,
    CycleRow,
    FillRow,
    OrderRow,
    SeasonRow,
    TraceRow,
)
from openbell_testkit.archives import archive_rows, flip_byte
from openbell_testkit.cli import clean_env, openbell
from openbell_testkit.compare import TABLES, ledger_rows
from openbell_testkit.llm import Body, ScriptedModel, finish, serve_script, tool_turn

START, END = "2025-11-03", "2025-11-06"
SLOTS = 4


def config_text(url: str, model_url: str, *, initial_cash: str = "10000") -> str:
    return f"""[store]
url = "{url}"

[log]
level = "warning"

[http]
listen = "127.0.0.1:0"

[markets.crypto]
universe = "crypto10"
cadence = "daily"
source = "ccxt:binance"
initial_cash = "{initial_cash}"

[[agents]]
name = "hold"
kind = "buy_and_hold"
markets = ["crypto"]

[[agents]]
name = "absent"
kind = "mcp"
markets = ["crypto"]
max_wall_s = 0.2

[[agents]]
name = "trader"
kind = "llm"
markets = ["crypto"]
base_url = "{model_url}"
model = "scripted-1"
api_key_env = "SCRIPTED_API_KEY"
price_in_per_mtok = "1"
price_out_per_mtok = "2"
max_usd_per_day = "5"
"""


@dataclass(frozen=True)
class Season:
    cwd: Path
    url: str
    config: Path
    model_url: str
    sha256: str
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return openbell(self.cwd, *args, env=self.env, timeout_s=120)


def _sqlite_path(url: str) -> Path | None:
    return Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None


@pytest.fixture
def season(db_url: str, tmp_path: Path) -> Iterator[Season]:
    path = _sqlite_path(db_url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    with serve_script(ScriptedModel(script=[])) as model_url:
        config = tmp_path / "openbell.toml"
        config.write_text(config_text(db_url, model_url), encoding="utf-8")
        env = clean_env(SCRIPTED_API_KEY="k-0123456789abcdef")
        opened = openbell(tmp_path, "season", "open", "s1", "--start", START, "--end", END, env=env)
        assert opened.returncode == 0, opened.stderr
        sha256 = opened.stdout.split("manifest sha256 ")[1].split()[0]
        found = Season(
            cwd=tmp_path, url=db_url, config=config, model_url=model_url, sha256=sha256, env=env
        )
        replayed = found.run("replay", "--season", "s1")
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        assert f"{2 * SLOTS} cycles done, 0 failed, {SLOTS} skipped" in replayed.stdout
        yield found


def _count(engine: Engine, query: Any) -> int:
    with engine.connect() as connection:
        return int(connection.execute(query).scalar_one())


def _agent_cycles(agent: str) -> Any:
    return (
        select(func.count())
        .select_from(CycleRow)
        .join(AccountRow, col(AccountRow.id) == CycleRow.account_id)
        .join(AgentRow, col(AgentRow.id) == AccountRow.agent_id)
        .where(col(AgentRow.name) == agent)
    )


def test_the_manifest_hash_is_stored_and_named_by_the_board_the_api_and_the_page(
    season: Season,
) -> None:
    engine = make_engine(season.url)
    try:
        with engine.connect() as connection:
            stored, digest = connection.execute(
                select(col(SeasonRow.manifest), col(SeasonRow.manifest_sha256))
            ).one()
        assert digest == season.sha256 == hashlib.sha256(stored.encode()).hexdigest()
        manifest = json.loads(stored)
        assert set(manifest["agents"]) == {"hold", "absent", "trader"}
        assert manifest["season"] == {"name": "s1", "start": START, "end": END}

        board = season.run("leaderboard", "--format", "json")
        assert board.returncode == 0, board.stderr
        (record,) = json.loads(board.stdout)["leaderboards"]
        assert record["season"]["manifest_sha256"] == season.sha256
        table = season.run("leaderboard")
        assert f"season s1 ({START} .. {END}, open), manifest sha256 {season.sha256}" in (
            table.stdout
        )

        with TestClient(Starlette(routes=[*api_routes(engine), *page_routes(engine)])) as client:
            api_board = client.get("/api/v1/leaderboard/crypto").json()
            assert api_board == record  # the API's board is the CLI's, season included
            chosen = json.loads(season.run("leaderboard", "--season", "s1", "-f", "json").stdout)
            (chosen_board,) = chosen["leaderboards"]
            assert chosen_board["start"].startswith(START)
            assert client.get("/api/v1/leaderboard/crypto?season=s1").json() == chosen_board
            assert client.get("/api/v1/leaderboard/crypto?season=nope").status_code == 404
            listed = client.get("/api/v1/seasons").json()
            assert listed["current"] == "s1"
            assert [s["manifest_sha256"] for s in listed["seasons"]] == [season.sha256]
            document = client.get("/api/v1/seasons/s1").json()
            assert document["manifest"] == manifest
            assert client.get("/api/v1/seasons/nope").status_code == 404
            arena = client.get("/").text
            assert season.sha256 in arena
            assert 'href="/seasons/s1"' in arena
            page = client.get("/seasons/s1")
            assert page.status_code == 200
            assert season.sha256 in page.text
            assert "agent_absent" in page.text
    finally:
        engine.dispose()


def test_the_card_states_the_ledgers_own_figures(season: Season, tmp_path: Path) -> None:
    out = tmp_path / "card.md"
    written = season.run("season", "card", "s1", "--out", str(out))
    assert written.returncode == 0, written.stderr
    card = out.read_text("utf-8")
    engine = make_engine(season.url)
    try:
        skipped = _count(engine, _agent_cycles("absent").where(col(CycleRow.status) == "skipped"))
        done_hold = _count(engine, _agent_cycles("hold").where(col(CycleRow.status) == "done"))
        fills = _count(
            engine,
            select(func.count())
            .select_from(FillRow)
            .join(OrderRow, col(OrderRow.id) == FillRow.order_id)
            .join(AccountRow, col(AccountRow.id) == OrderRow.account_id)
            .join(AgentRow, col(AgentRow.id) == AccountRow.agent_id)
            .where(col(AgentRow.name) == "hold"),
        )
        exchanges = _count(
            engine,
            select(func.count()).select_from(TraceRow).where(col(TraceRow.role) == "assistant"),
        )
        with engine.connect() as connection:
            costs = connection.execute(
                select(col(CycleRow.cost)).where(col(CycleRow.cost).is_not(None))
            ).scalars()
            spent = sum((Decimal(cost) for cost in costs), Decimal(0))
            links = connection.execute(
                select(col(AgentRow.name), col(CycleDigestRow.seq), col(CycleDigestRow.digest))
                .join(AccountRow, col(AccountRow.id) == CycleDigestRow.account_id)
                .join(AgentRow, col(AgentRow.id) == AccountRow.agent_id)
            ).all()
    finally:
        engine.dispose()
    heads = {name: (seq, digest) for name, seq, digest in sorted(links)}
    assert sorted(heads) == ["absent", "hold", "trader"]
    assert skipped == SLOTS
    assert done_hold == SLOTS
    assert fills > 0
    assert exchanges > 0
    assert spent > 0
    assert f"| absent | crypto | {SLOTS} | 0 | 0 | {skipped} | 0 | 0 | 0 | 0 |" in card
    assert f"| hold | crypto | {SLOTS} | {done_hold} | 0 | 0 | 0 | 0 | 0 | {fills} |" in card
    assert f"| absent | crypto | skipped | agent\\_absent | {skipped} |" in card
    assert f"| trader | crypto | scripted-1 | scripted-1 x{exchanges} from {START} 00:00 UTC |" in (
        card
    )
    assert "| no | not stated |" in card
    assert f"| {spent.normalize():f} (" in card
    assert f"| manifest | {season.sha256} |" in card
    assert "Chain heads: 3 accounts;" in card
    for name, (seq, digest) in heads.items():
        assert f"| chain head {name} in crypto | {digest} (link {seq}) |" in card
    assert f"| crypto | daily | the cadence's default | {SLOTS} | {START} 00:00 UTC |" in card
    assert f"Cycles inside the window: {3 * SLOTS} by a replay run." in card
    assert "Masking: absent bright; trader bright." in card
    assert "| crypto | crypto10 |" in card
    assert "| crypto | 10 (min 0) | 0 | 0 | 5 | 10 |" in card


def test_a_changed_config_is_refused_while_the_season_is_open(season: Season) -> None:
    changed = season.cwd / "changed.toml"
    changed.write_text(
        config_text(season.url, season.model_url, initial_cash="20000"), encoding="utf-8"
    )
    for command in (("replay", "--season", "s1", "--resume"), ("run", "--season", "s1")):
        refused = season.run(*command, "--config", str(changed))
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "differs from season s1's manifest" in refused.stderr
        assert 'markets.crypto.initial_cash: the season has "10000", the config "20000"' in (
            refused.stderr
        )
    same = season.run("replay", "--season", "s1", "--resume", "--config", str(season.config))
    assert same.returncode == 0, same.stderr
    assert f"{3 * SLOTS} already finished" in same.stdout
    assert season.run("season", "close", "s1").returncode == 0
    closed = season.run("replay", "--season", "s1", "--resume")
    assert closed.returncode == 2
    assert "season 's1' was closed at" in closed.stderr
    listed = json.loads(season.run("season", "list", "--format", "json").stdout)
    assert listed["seasons"][0]["closed_at"] is not None


@pytest.mark.sqlite_only
def test_a_replay_season_reruns_in_a_fresh_ledger_from_its_manifest(
    season: Season, tmp_path: Path
) -> None:
    fresh = tmp_path / "rerun.db"
    rerun = season.run("replay", "--season", "s1", "--season-from", season.url, "--db", str(fresh))
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    first = json.loads(season.run("leaderboard", "-f", "json").stdout)["leaderboards"]
    again = json.loads(season.run("leaderboard", "-f", "json", "--db", str(fresh)).stdout)
    (before,), (after,) = first, again["leaderboards"]
    assert after["season"]["manifest_sha256"] == before["season"]["manifest_sha256"]
    assert after["rows"] == before["rows"]
    opened_again = season.run(
        "season", "open", "s1", "--start", START, "--end", END, "--db", str(fresh)
    )
    assert opened_again.returncode == 2
    assert "exists already" in opened_again.stderr


@pytest.mark.sqlite_only
def test_a_season_is_opened_before_its_first_slot(season: Season) -> None:
    late = season.run("season", "open", "s2", "--start", "2025-11-05", "--end", "2025-11-09")
    assert late.returncode == 2
    assert "already holds 6 cycles inside its window" in late.stderr
    after = season.run("season", "open", "s2", "--start", "2025-11-07")
    assert after.returncode == 0, after.stderr
    open_ended = season.run("replay", "--season", "s2")
    assert open_ended.returncode == 2
    assert "a replay season needs an end" in open_ended.stderr
    named = season.run("season", "open", "../s3", "--start", "2025-12-01")
    assert named.returncode == 2
    assert "season name '../s3': use 1-64 letters" in named.stderr
    nowhere = season.run("replay", "--season", "s1", "--db", str(season.cwd / "missing.db"))
    assert nowhere.returncode == 2
    assert "open the season there first" in nowhere.stderr
    assert not (season.cwd / "missing.db").exists()


def _buyer(body: Body) -> Body:
    """Buys a tenth of NAV in BTC, then finishes: a decision the re-run must make again."""
    if any(message["role"] == "tool" for message in body["messages"]):
        return finish("Bought.")
    return tool_turn(
        ("get_quote", {"symbols": ["BTC/USDT"]}),
        ("place_order", {"symbol": "BTC/USDT", "side": "buy", "target_weight": "0.1"}),
    )


@pytest.mark.sqlite_only
def test_a_season_reruns_from_its_recorded_answers_with_no_model_server(tmp_path: Path) -> None:
    original = tmp_path / "original.db"
    env = clean_env(SCRIPTED_API_KEY="k-0123456789abcdef")
    model = ScriptedModel(script=[_buyer] * 100)
    with serve_script(model) as model_url:
        config = tmp_path / "openbell.toml"
        config.write_text(config_text(f"sqlite:///{original}", model_url), encoding="utf-8")
        opened = openbell(tmp_path, "season", "open", "s1", "--start", START, "--end", END, env=env)
        assert opened.returncode == 0, opened.stderr
        ran = openbell(tmp_path, "replay", "--season", "s1", env=env, timeout_s=120)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    asked = len(model.requests)
    assert asked >= 2 * SLOTS  # a quote-and-order turn and a finish each slot
    # The server is gone: the season runs again from the answers the original ledger recorded.
    rerun = tmp_path / "rerun.db"
    again = openbell(
        tmp_path,
        "replay",
        "--season",
        "s1",
        "--season-from",
        str(original),
        "--answers",
        "s1",
        "--db",
        str(rerun),
        env=clean_env(),  # no key either
        timeout_s=120,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(model.requests) == asked
    first, second = ledger_rows(original), ledger_rows(rerun)
    for table in TABLES:
        assert second[table] == first[table], table
    # The equality covers the model's decisions: it traded (a later buy to the same weight may
    # be too small to fill).
    assert [name for name, _ in first["fill"]].count("trader") >= 1
    # Without the ledger that recorded it, the season's own name is refused as a source.
    refused = openbell(
        tmp_path,
        "replay",
        "--season",
        "s1",
        "--answers",
        "s1",
        "--db",
        str(tmp_path / "x.db"),
        env=env,
    )
    assert refused.returncode == 2
    assert "--season-from" in refused.stderr


@pytest.mark.sqlite_only
def test_a_season_is_exported_and_verified_from_its_archive_alone(tmp_path: Path) -> None:
    """A replay season with a baseline and two scripted LLM agents: `season export` writes its
    archive under the season's manifest hash; `season verify` passes on it with no database, and
    names the row when one byte of a fill, a NAV or a model answer changes in a copy."""
    ledger = tmp_path / "season.db"
    env = clean_env(SCRIPTED_API_KEY="k-0123456789abcdef")
    with (
        serve_script(ScriptedModel([_buyer] * 100)) as one,
        serve_script(ScriptedModel([_buyer] * 100)) as two,
    ):
        text = config_text(f"sqlite:///{ledger}", one) + (
            f'\n[[agents]]\nname = "second"\nkind = "llm"\nmarkets = ["crypto"]\n'
            f'base_url = "{two}"\nmodel = "scripted-2"\napi_key_env = "SCRIPTED_API_KEY"\n'
        )
        (tmp_path / "openbell.toml").write_text(text, encoding="utf-8")
        opened = openbell(tmp_path, "season", "open", "s1", "--start", START, "--end", END, env=env)
        assert opened.returncode == 0, opened.stderr
        sha256 = opened.stdout.split("manifest sha256 ")[1].split()[0]
        ran = openbell(tmp_path, "replay", "--season", "s1", env=env, timeout_s=120)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    archive = tmp_path / "archive"
    exported = openbell(tmp_path, "season", "export", "s1", str(archive), env=env)
    assert exported.returncode == 0, exported.stderr
    assert f"manifest sha256 {sha256}" in exported.stdout
    assert json.loads((archive / "heads.json").read_text())["manifest_sha256"] == sha256
    ledger.unlink()  # the archive alone
    verified = openbell(tmp_path, "season", "verify", str(archive), env=env)
    assert verified.returncode == 0, verified.stderr
    for table, column in (("fill", "price"), ("nav_snapshot", "nav"), ("trace", "response")):
        copy = tmp_path / f"copy-{table}"
        shutil.copytree(archive, copy)
        rows = archive_rows(copy, table).to_pylist()
        index = next(i for i, row in enumerate(rows) if row[column])
        row = flip_byte(copy, table, column, index)
        failed = openbell(tmp_path, "season", "verify", str(copy), env=env)
        assert failed.returncode == 1, failed.stdout + failed.stderr
        assert table in failed.stderr
        assert str(row["id"]) in failed.stderr
