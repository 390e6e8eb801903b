"""The methods card's ledger figures (issue 26, item 3), on SQLite and Postgres: cycles by status
and reason inside the window only, budget_exhausted skips, spend priced or unpriced, the model
identities each account's exchanges reported (a change flagged), and hostile provider text inert
on the season's page."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient

from openbell.ops.seasons.card import methods_card, to_markdown
from openbell.ops.web.pages import page_routes
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, CycleUsage, TraceEntry
from openbell.store.seasons import Season, open_season

OPENED = datetime(2026, 1, 4, 12, tzinfo=UTC)
HOSTILE = "<script>alert(1)</script>|gpt-x"
MANIFEST = {
    "format": "openbell.season/1",
    "agents": {
        "priced": {"kind": "llm", "model": "gpt-x", "price_in_per_mtok": "1", "max_turns": 5},
        "unpriced": {"kind": "llm", "model": "local", "max_usd_per_day": None},
        "hold": {"kind": "buy_and_hold"},
    },
    "markets": {"us": {"cadence": "daily", "slots": None}},
}


def slot(day: int) -> datetime:
    return datetime(2026, 1, day, 14, 30, tzinfo=UTC)


def _cycle(
    ledger: Ledger,
    account_id: int,
    day: int,
    status: CycleStatus,
    *,
    reason: str | None = None,
    error_class: str | None = None,
    usage: CycleUsage | None = None,
    model: str | None = None,
) -> None:
    at = slot(day)
    cycle_id = ledger.claim_cycle(account_id, at, "run:host:1", at + timedelta(minutes=5), at)
    assert cycle_id is not None
    if usage is not None:
        entries = [
            TraceEntry(cycle_id=cycle_id, role="assistant", at=at, content="ok", model=model)
        ]
        ledger.append_journal(cycle_id, entries, usage)
    ledger.finish_cycle(cycle_id, status, at, reason=reason, error_class=error_class)


def build(engine: Engine) -> Season:
    season = Season(
        name="winter",
        manifest=json.dumps(MANIFEST, sort_keys=True),
        manifest_sha256="a" * 64,
        start_on=date(2026, 1, 5),
        end_on=date(2026, 1, 9),
        opened_at=OPENED,
        closed_at=None,
        config="",
        config_path="/nowhere/openbell.toml",
    )
    open_season(engine, season)
    ledger = Ledger(engine)
    ids = {}
    for name, kind in (("priced", "llm"), ("unpriced", "llm"), ("hold", "buy_and_hold")):
        agent_id = ledger.ensure_agent(name, kind, OPENED)
        ids[name] = ledger.open_account(agent_id, "us", "USD", Decimal(100_000), OPENED)
    priced = CycleUsage(tokens_in=1000, tokens_out=200, cost=Decimal("0.25"), llm_attempts=1)
    _cycle(ledger, ids["priced"], 5, CycleStatus.DONE, usage=priced, model="gpt-x-0601")
    _cycle(ledger, ids["priced"], 6, CycleStatus.DONE, usage=priced, model=HOSTILE)
    _cycle(ledger, ids["priced"], 7, CycleStatus.SKIPPED, reason="budget_exhausted")
    _cycle(ledger, ids["priced"], 8, CycleStatus.SKIPPED, reason="budget_exhausted")
    _cycle(ledger, ids["priced"], 12, CycleStatus.DONE, usage=priced, model="gpt-x-0601")
    unpriced = CycleUsage(tokens_in=500, tokens_out=50, cost=None, llm_attempts=1)
    _cycle(ledger, ids["unpriced"], 5, CycleStatus.DONE, usage=unpriced, model="local")
    _cycle(ledger, ids["unpriced"], 6, CycleStatus.FAILED, error_class="LlmUnavailable")
    _cycle(ledger, ids["hold"], 5, CycleStatus.DONE)
    _cycle(ledger, ids["hold"], 6, CycleStatus.SKIPPED, reason="data_unavailable")
    return season


def test_the_card_counts_the_windows_cycles_by_status_and_reason(engine: Engine) -> None:
    card = to_markdown(methods_card(engine, build(engine)))
    # Slot 12 is after the window: its cycle is not counted anywhere.
    assert "| priced | us | 4 | 2 | 0 | 2 | 0 | 0 | 0 | 0 |" in card
    assert "| unpriced | us | 2 | 1 | 1 | 0 | 0 | 0 | 0 | 0 |" in card
    assert "| hold | us | 2 | 1 | 0 | 1 | 0 | 0 | 0 | 0 |" in card
    assert "| priced | us | skipped | budget\\_exhausted | 2 |" in card
    assert "| unpriced | us | failed | LlmUnavailable | 1 |" in card
    assert "| hold | us | skipped | data\\_unavailable | 1 |" in card
    assert "Cycles inside the window by final status: 4 done, 1 failed, 3 skipped" in card
    assert "Cycles inside the window: 8 by a live run." in card


def test_the_card_reports_spend_and_the_models_as_answered(engine: Engine) -> None:
    card = to_markdown(methods_card(engine, build(engine)))
    assert "| 2 | 0.5 (2000 tokens in, 400 out) | 2 |" in card  # priced: 2 cycles, 2 skips
    assert "| unpriced | 1 | unpriced (500 tokens in, 50 out) | 0 |" in card
    assert "gpt-x-0601 x1 from 2026-01-05 14:30 UTC; " in card
    assert "\\<script\\>alert(1)\\</script\\>\\|gpt-x x1 from 2026-01-06 14:30 UTC | yes |" in card
    assert (
        "| unpriced | us | local | local x1 from 2026-01-05 14:30 UTC | no | not stated |" in card
    )
    assert "<script>" not in card


def test_the_seasons_page_shows_hostile_model_text_inert(engine: Engine) -> None:
    build(engine)
    with TestClient(Starlette(routes=page_routes(engine))) as client:
        page = client.get("/seasons/winter")
        missing = client.get("/seasons/summer")
    assert page.status_code == 200
    assert "<script>alert(1)" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|gpt-x x1" in page.text
    assert "budget_exhausted" in page.text
    assert missing.status_code == 404


def test_the_card_states_a_models_registered_training_cutoff(engine: Engine) -> None:
    """The registry of the config stored with the season states `local`'s cutoff: the card gives
    it with its source (the slots decided inside it are counted from the NAV snapshots, which
    this ledger has none of: tests/acceptance/test_cutoffs.py counts them on a replay)."""
    season = build(engine)
    config = (
        '[markets.us]\nuniverse = "nasdaq100"\ncadence = "daily"\nsource = "yfinance"\n'
        'initial_cash = "100000"\n\n'
        '[cutoffs."local"]\ncutoff = "2026-01-05"\nsource = "https://local.test/card"\n'
    )
    card = to_markdown(methods_card(engine, replace(season, config=config)))
    assert (
        "| unpriced | us | local | local x1 from 2026-01-05 14:30 UTC | no | 2026-01-05 "
        "(https://local.test/card) |" in card
    )
    # Its gpt-x models have no entry, in that registry or the bundled one.
    assert "| yes | not stated |" in card
