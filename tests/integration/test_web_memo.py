"""The web API's memo: a leaderboard and a report computed once, and again after any ledger write.

Over the demo's crypto market replayed for a week on SQLite and Postgres: the memo serves the same
view while the ledger is unchanged, and a new one, equal to a fresh computation, after a cycle is
claimed, after it finishes (an update, not an insert) and after a NAV snapshot is written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient

from openbell.markets.domain import utc
from openbell.ops.reports.exporting import leaderboard_record, report_record
from openbell.ops.reports.market_reports import leaderboard, report
from openbell.ops.web.api import api_routes
from openbell.ops.web.memo import ViewMemo
from openbell.store import queries
from openbell.store.db import make_engine
from openbell.store.holdings import account_holdings
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, SnapshotKind
from openbell_testkit.replay import demo_crypto_replayed

_T = TypeVar("_T")

START, END = date(2025, 10, 1), date(2025, 10, 7)


def test_the_memo_recomputes_after_every_kind_of_ledger_write(db_url: str, tmp_path: Path) -> None:
    demo_crypto_replayed(db_url, tmp_path, START, END)
    engine = make_engine(db_url)
    try:
        memo = ViewMemo(engine)
        first = memo.view("crypto")
        assert memo.view("crypto") is first
        assert memo.report("random", "crypto") is memo.report("random", "crypto")
        assert leaderboard_record(first.leaderboard) == leaderboard_record(
            leaderboard(engine, "crypto")
        )

        ledger = Ledger(engine)
        account_id = next(
            info.account_id
            for info in queries.accounts(engine, "crypto")
            if info.agent_name == "random"
        )
        slot_at = utc(2025, 10, 8)
        now = slot_at + timedelta(seconds=1)
        seen = [first]

        def changed() -> None:
            view = memo.view("crypto")
            assert all(view is not old for old in seen)
            seen.append(view)
            assert memo.view("crypto") is view
            assert leaderboard_record(view.leaderboard) == leaderboard_record(
                leaderboard(engine, "crypto")
            )
            assert report_record(memo.report("random", "crypto")) == report_record(
                report(engine, "random", "crypto")
            )

        cycle_id = ledger.claim_cycle(account_id, slot_at, "test", now + timedelta(hours=1), now)
        assert cycle_id is not None
        changed()
        before = memo.view("crypto").leaderboard.rows
        ledger.finish_cycle(cycle_id, CycleStatus.DONE, now, held_by="test")
        changed()
        row = next(r for r in memo.view("crypto").leaderboard.rows if r.agent == "random")
        old = next(r for r in before if r.agent == "random")
        assert row.behaviour != old.behaviour  # the finished cycle counts as a no-trade decision
        (held,) = account_holdings(engine, market="crypto", agent="random")
        marks = {h.symbol: h.last_mark for h in held.holdings if h.last_mark is not None}
        ledger.write_nav_snapshot(account_id, slot_at, SnapshotKind.SLOT, marks)
        changed()
        row = next(r for r in memo.view("crypto").leaderboard.rows if r.agent == "random")
        assert row.panel.end_at == slot_at
    finally:
        engine.dispose()


def test_a_slot_of_another_market_leaves_the_view_and_one_of_its_own_does_not(
    db_url: str, tmp_path: Path
) -> None:
    demo_crypto_replayed(db_url, tmp_path, START, END)
    engine = make_engine(db_url)
    try:
        memo = ViewMemo(engine)
        crypto = memo.view("crypto")
        ledger = Ledger(engine)
        slot_at = utc(2025, 10, 8, 14)
        now = slot_at + timedelta(seconds=1)
        agent_id = ledger.ensure_agent("us-only", "cash", now)
        us_account = ledger.open_account(agent_id, "us", "USD", Decimal(10000), now)
        us = memo.view("us")
        version = queries.ledger_version(engine)
        # A US slot: the account's cycle claimed, its snapshot written, the cycle finished.
        cycle_id = ledger.claim_cycle(us_account, slot_at, "test", now + timedelta(hours=1), now)
        assert cycle_id is not None
        ledger.write_nav_snapshot(us_account, slot_at, SnapshotKind.SLOT, {})
        ledger.finish_cycle(cycle_id, CycleStatus.DONE, now, held_by="test")
        assert queries.ledger_version(engine) != version
        assert memo.view("crypto") is crypto  # not recomputed
        assert memo.view("us") is not us
        # A crypto cycle claimed: the crypto view is recomputed.
        crypto_account = queries.accounts(engine, "crypto")[0].account_id
        assert ledger.claim_cycle(crypto_account, slot_at, "test", now, now) is not None
        assert memo.view("crypto") is not crypto
    finally:
        engine.dispose()


class _RecordingMemo(ViewMemo):
    """The memo, recording the key of every value it builds (rather than gives again)."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.built: list[tuple[str | datetime | None, ...]] = []

    def remember(
        self,
        kind: type[_T],
        key: tuple[str | datetime | None, ...],
        build: Callable[[], _T],
        *,
        market: str | None = None,
    ) -> _T:
        def recorded() -> _T:
            self.built.append(key)
            return build()

        return super().remember(kind, key, recorded, market=market)


def _documents(agent: str, market: str) -> tuple[str, ...]:
    """The API documents of a market kept in the memo as JSON text."""
    account = f"/api/v1/agents/{agent}/{market}"
    return (
        f"/api/v1/leaderboard/{market}",
        f"/api/v1/leaderboard/{market}/significance",
        f"{account}/nav",
        f"{account}/benchmark",
        f"{account}/metrics",
    )


def _us_slot(ledger: Ledger, account_id: int, slot_at: datetime) -> None:
    """A US slot of one account: its cycle claimed, its snapshot written, the cycle finished."""
    now = slot_at + timedelta(seconds=1)
    cycle_id = ledger.claim_cycle(account_id, slot_at, "test", now + timedelta(hours=1), now)
    assert cycle_id is not None
    ledger.write_nav_snapshot(account_id, slot_at, SnapshotKind.SLOT, {})
    ledger.finish_cycle(cycle_id, CycleStatus.DONE, now, held_by="test")


def test_the_api_json_of_a_market_is_kept_by_its_version(db_url: str, tmp_path: Path) -> None:
    demo_crypto_replayed(db_url, tmp_path, START, END)
    engine = make_engine(db_url)
    try:
        ledger = Ledger(engine)
        opened_at = utc(2025, 10, 8, 13)
        agent_id = ledger.ensure_agent("us-only", "cash", opened_at)
        us_account = ledger.open_account(agent_id, "us", "USD", Decimal(10000), opened_at)
        for hour in (14, 15):
            _us_slot(ledger, us_account, utc(2025, 10, 8, hour))
        crypto = _documents("random", "crypto")
        us = _documents("us-only", "us")
        memo = _RecordingMemo(engine)

        def served(urls: tuple[str, ...], fresh: bool = False) -> list[bytes]:
            routes = api_routes(engine) if fresh else api_routes(engine, memo=memo)
            with TestClient(Starlette(routes=routes)) as client:
                responses = [client.get(url) for url in urls]
            assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
            return [r.content for r in responses]

        def json_built(market: str) -> set[str | datetime | None]:
            return {key[1] for key in memo.built if key[0] == "json" and market in key}

        first_crypto, first_us = served(crypto), served(us)
        assert json_built("crypto") == json_built("us") == {
            "leaderboard", "significance", "nav", "benchmark", "metrics",
        }  # fmt: skip
        memo.built.clear()

        _us_slot(ledger, us_account, utc(2025, 10, 8, 16))  # a slot of the US market
        assert served(crypto) == first_crypto
        assert not [key for key in memo.built if "crypto" in key]  # every crypto value kept
        now_us = served(us)
        assert now_us != first_us
        assert now_us == served(us, fresh=True)
        assert json_built("us") == {"leaderboard", "significance", "nav", "benchmark", "metrics"}
        memo.built.clear()

        # A crypto cycle claimed: crypto's documents are built again, the US ones are kept.
        crypto_account = next(
            info.account_id
            for info in queries.accounts(engine, "crypto")
            if info.agent_name == "random"
        )
        slot_at = utc(2025, 10, 8)
        now = slot_at + timedelta(seconds=1)
        assert ledger.claim_cycle(crypto_account, slot_at, "test", now, now) is not None
        assert served(us) == now_us
        assert not [key for key in memo.built if "us" in key]
        assert served(crypto) == served(crypto, fresh=True)
        assert json_built("crypto") == {
            "leaderboard", "significance", "nav", "benchmark", "metrics",
        }  # fmt: skip
    finally:
        engine.dispose()


def test_requests_for_markets_that_do_not_exist_leave_nothing_in_the_memo(
    db_url: str, tmp_path: Path
) -> None:
    demo_crypto_replayed(db_url, tmp_path, START, END)
    engine = make_engine(db_url)
    try:
        memo = ViewMemo(engine)
        with TestClient(Starlette(routes=api_routes(engine, memo=memo))) as client:
            for number in range(40):
                for path in ("", "/significance"):
                    response = client.get(f"/api/v1/leaderboard/nowhere{number}{path}")
                    assert response.status_code in (400, 404)
            assert client.get("/api/v1/leaderboard/crypto").status_code == 200
        # Every failed build took its key's lock with it; the one real board is kept.
        assert memo._building == {}
        assert len(memo._values) >= 1
    finally:
        engine.dispose()
