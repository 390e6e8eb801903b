"""Training cutoffs through `openbell replay`, `openbell leaderboard` and the API (issue 27,
item 1).

Three LLM agents trade a five-day US replay (2025-07-07 .. 2025-07-11) against one scripted model
on 127.0.0.1 that answers as the model each request names: `old` buys on the first cycle with a
model the config's `[cutoffs."scripted-old"]` dates 2025-07-08 (inside the window), `fresh` with
one dated before the window, `mystery` with one the registry does not know; a buy-and-hold
baseline asks no model. The headline board marks exactly `old`'s slots before 2025-07-09, measures
it over the slots after, and says so; `--all-slots` and `?slots=all` measure every slot.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from openbell.ops.config.schema import load_config
from openbell.ops.reports.contamination import CutoffSettings, agent_cutoffs
from openbell.ops.web.api import api_routes
from openbell.ops.web.app import web_routes
from openbell.store.db import make_engine
from openbell_testkit.cli import clean_env, openbell
from openbell_testkit.llm import ScriptedModel, finish, serve_script, tool_turn

CLEAN_FROM = datetime(2025, 7, 9, tzinfo=UTC)


def answers_as_asked(body: dict[str, Any]) -> dict[str, Any]:
    """Buys 10 AAPL in the first turn of a cycle when it holds nothing, then finishes; the reply
    names the model the request asked for (as a provider's does)."""
    first = not any(message["role"] == "tool" for message in body["messages"])
    holds = any('"AAPL"' in m["content"] for m in body["messages"] if m["role"] == "user")
    reply = (
        tool_turn(("place_order", {"symbol": "AAPL", "side": "buy", "shares": 10}))
        if first and not holds
        else finish("holding")
    )
    return {**reply, "model": body["model"]}


def write_config(tmp_path: Path, url: str) -> Path:
    agents = "".join(
        f'[[agents]]\nname = "{name}"\nkind = "llm"\nmarkets = ["us"]\n'
        f'base_url = "{url}"\nmodel = "{model}"\n\n'
        for name, model in (
            ("old", "scripted-old"),
            ("fresh", "scripted-new"),
            ("mystery", "scripted-1"),
        )
    )
    config = tmp_path / "openbell.toml"
    config.write_text(
        f'[store]\nurl = "sqlite:///{(tmp_path / "ledger.db").as_posix()}"\n\n'
        '[cutoffs."scripted-old"]\ncutoff = "2025-07-08"\nsource = "the test\'s card"\n\n'
        '[cutoffs."scripted-new"]\ncutoff = "2025-06"\nsource = "https://example.test/card"\n\n'
        '[markets.us]\nuniverse = ["AAPL", "MSFT"]\ncadence = "daily"\n'
        'source = "bundled"\ninitial_cash = "100000"\n\n'
        '[[agents]]\nname = "hold"\nkind = "buy_and_hold"\nmarkets = ["us"]\n\n' + agents,
        encoding="utf-8",
    )
    return config


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp_path = tmp_path_factory.mktemp("cutoffs")
    model = ScriptedModel([answers_as_asked] * 400)
    with serve_script(model) as url:
        config = write_config(tmp_path, url)
        done = openbell(
            tmp_path, "replay", "--config", str(config), "--start", "2025-07-07", "--end",
            "2025-07-11",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "20 cycles done, 0 failed" in done.stdout, done.stdout
    return tmp_path, config


def slot_navs(tmp_path: Path, agent: str) -> list[tuple[datetime, Decimal]]:
    with sqlite3.connect(tmp_path / "ledger.db") as connection:
        rows = connection.execute(
            "SELECT s.at, s.nav FROM nav_snapshot s JOIN account a ON a.id = s.account_id "
            "JOIN agent g ON g.id = a.agent_id WHERE g.name = ? AND s.kind = 'slot' ORDER BY s.at",
            (agent,),
        ).fetchall()
    return [(datetime.fromisoformat(at).replace(tzinfo=UTC), Decimal(str(nav))) for at, nav in rows]


def board(tmp_path: Path, config: Path, *extra: str) -> dict[str, Any]:
    shown = openbell(tmp_path, "leaderboard", "--config", str(config), "--format", "json", *extra)
    assert shown.returncode == 0, shown.stderr
    (found,) = json.loads(shown.stdout)["leaderboards"]
    assert isinstance(found, dict)
    return found


def returns(found: dict[str, Any]) -> dict[str, float]:
    return {row["name"]: row["cumulative_return"] for row in found["rows"]}


def test_the_headline_marks_exactly_the_slots_before_the_cutoff(
    replayed: tuple[Path, Path],
) -> None:
    tmp_path, config = replayed
    navs = slot_navs(tmp_path, "old")
    inside = [at for at, _ in navs if at < CLEAN_FROM]
    assert len(navs) == 5
    assert len(inside) == 2
    headline = board(tmp_path, config)
    marks = {agent["name"]: agent for agent in headline["cutoffs"]["agents"]}
    assert headline["cutoffs"]["view"] == "post-cutoff"
    assert marks["old"]["status"] == "inside"
    assert marks["old"]["inside_slots"] == len(inside)
    assert marks["old"]["cutoff"] == "2025-07-08"
    assert marks["old"]["source"] == "the test's card"
    assert marks["fresh"]["status"] == "clean"
    assert marks["fresh"]["inside_slots"] == 0
    assert marks["mystery"]["status"] == "unknown"
    assert marks["hold"]["status"] == "no_model"
    assert headline["cutoffs"]["excluded"] == ["old"]
    assert headline["cutoffs"]["note"].startswith(
        "headline: post-cutoff slots only; 1 agents had in-window slots excluded"
    )
    # `old` is measured from its first slot after the cutoff; the others over every slot.
    after = [nav for at, nav in navs if at >= CLEAN_FROM]
    assert returns(headline)["old"] == pytest.approx(float(after[-1] / after[0] - 1))
    every = board(tmp_path, config, "--all-slots")
    assert every["cutoffs"]["view"] == "all"
    assert returns(every)["old"] == pytest.approx(float(navs[-1][1] / navs[0][1] - 1))
    assert returns(every)["old"] != pytest.approx(returns(headline)["old"])
    assert returns(every)["fresh"] == pytest.approx(returns(headline)["fresh"])
    rows = {row["name"]: row for row in headline["rows"]}
    assert rows["old"]["cutoff_status"] == "inside"
    assert rows["mystery"]["cutoff_status"] == "unknown"


def test_the_table_marks_the_rows_and_says_which_view(replayed: tuple[Path, Path]) -> None:
    tmp_path, config = replayed
    shown = openbell(
        tmp_path, "leaderboard", "--wide", "--config", str(config), env=clean_env(COLUMNS="400")
    )
    assert shown.returncode == 0, shown.stderr
    assert "old [inside cutoff: 2 slots]" in shown.stdout
    assert "mystery [cutoff unknown]" in shown.stdout
    assert "fresh [" not in shown.stdout
    assert "headline: post-cutoff slots only; 1 agents had in-window slots excluded" in shown.stdout
    every = openbell(
        tmp_path, "leaderboard", "--all-slots", "--config", str(config),
        env=clean_env(COLUMNS="300"),
    )  # fmt: skip
    assert "all slots: 1 agents have slots inside their model's training cutoff" in every.stdout


def test_the_api_serves_the_headline_by_default(replayed: tuple[Path, Path]) -> None:
    tmp_path, config = replayed
    settings = CutoffSettings.of(load_config(config))
    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        with TestClient(Starlette(routes=api_routes(engine, cutoffs=settings))) as client:
            headline = client.get("/api/v1/leaderboard/us")
            every = client.get("/api/v1/leaderboard/us", params={"slots": "all"})
            refused = client.get("/api/v1/leaderboard/us", params={"slots": "some"})
    finally:
        engine.dispose()
    assert headline.status_code == 200, headline.text
    assert every.status_code == 200, every.text
    assert refused.status_code == 400
    assert returns(headline.json()) == pytest.approx(returns(board(tmp_path, config)))
    assert returns(every.json()) == pytest.approx(returns(board(tmp_path, config, "--all-slots")))
    assert headline.json()["cutoffs"]["excluded"] == ["old"]


def test_the_arena_page_marks_the_rows_and_says_which_view(replayed: tuple[Path, Path]) -> None:
    tmp_path, config = replayed
    settings = CutoffSettings.of(load_config(config))
    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        with TestClient(Starlette(routes=web_routes(engine, cutoffs=settings))) as client:
            page = client.get("/")
            every = client.get("/", params={"slots": "all"})
    finally:
        engine.dispose()
    assert page.status_code == 200, page.text
    assert '<span class="cutoff-mark"' in page.text
    assert ">inside cutoff: 2 slots</span>" in page.text
    assert ">cutoff unknown</span>" in page.text
    assert "headline: post-cutoff slots only; 1 agents had in-window slots excluded" in page.text
    assert '<a href="/?slots=all">every slot</a>' in page.text
    assert '<a href="/">the post-cutoff headline</a>' in every.text
    assert every.status_code == 200, every.text
    assert "all slots: 1 agents have slots inside their model" in every.text
    assert ">inside cutoff: 2 slots</span>" in every.text


def test_the_csv_says_which_view(replayed: tuple[Path, Path]) -> None:
    tmp_path, config = replayed
    shown = openbell(tmp_path, "leaderboard", "--config", str(config), "--format", "csv")
    assert shown.returncode == 0, shown.stderr
    rows = list(csv.DictReader(io.StringIO(shown.stdout)))
    by_name = {row["name"]: row for row in rows}
    assert {row["slots"] for row in rows} == {"post-cutoff"}
    assert by_name["old"]["cutoff_status"] == "inside"
    assert by_name["old"]["inside_cutoff_slots"] == "2"
    assert by_name["mystery"]["cutoff_status"] == "unknown"


def test_the_methods_card_reads_each_agents_cutoff(replayed: tuple[Path, Path]) -> None:
    tmp_path, config = replayed
    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        lines = agent_cutoffs(engine, "us", None, None, CutoffSettings.of(load_config(config)))
    finally:
        engine.dispose()
    by_agent = {line.agent: line for line in lines}
    assert set(by_agent) == {"old", "fresh", "mystery"}  # the baseline asks no model
    assert (by_agent["old"].model, by_agent["old"].cutoff) == ("scripted-old", "2025-07-08")
    assert (by_agent["old"].source, by_agent["old"].inside_slots) == ("the test's card", 2)
    assert (by_agent["fresh"].cutoff, by_agent["fresh"].inside_slots) == ("2025-06", 0)
    assert (by_agent["mystery"].status, by_agent["mystery"].cutoff) == ("unknown", None)
