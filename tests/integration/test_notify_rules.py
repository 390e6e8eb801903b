"""Which notices the daemon's events make (`ops.notify.notices`), over a real ledger, with the send
replaced by a list (the network is the boundary; the receiver test is test_notify_daemon.py): the
rate limit, a drawdown said once until it recovers, a spent LLM budget and a model change read
from the cycle's trace, stale health once until it clears, and the digest once a day at its time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from sqlalchemy import Engine

from openbell.daemon.events import DaemonEvent
from openbell.ops.config.schema import NOTIFY_EVENTS
from openbell.ops.notify.notices import Notifications, drawdown
from openbell.ops.notify.sender import Notice, RateLimit
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, TraceEntry
from openbell_testkit.reports import CRYPTO_SLOTS, SLOTS, build_ledger

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def notifications(engine: Engine, **options: object) -> tuple[Notifications, list[Notice]]:
    sent: list[Notice] = []

    def send(notice: Notice) -> bool:
        sent.append(notice)
        return True

    settings: dict[str, object] = {
        "events": NOTIFY_EVENTS,
        "drawdown_pct": 0.0,
        "digest_at": "",
        "min_interval": timedelta(minutes=15),
        "max_per_hour": 30,
        "boards": lambda: ["us board"],
        **options,
    }
    return Notifications(send, engine=engine, **settings), sent  # type: ignore[arg-type]


def trouble(market: str, at: datetime, **fields: object) -> DaemonEvent:
    return DaemonEvent(
        kind="slot_finished",
        at=at,
        market=market,
        fields={"slot_at": at.isoformat(), "state": "data_unavailable", "cause": "dns", **fields},
    )


def test_one_notice_per_event_and_market_per_interval_and_a_cap_per_hour() -> None:
    limit = RateLimit(timedelta(minutes=15), max_per_hour=3)

    def notice(key: str, minutes: int) -> Notice:
        return Notice(key=key, at=AT + timedelta(minutes=minutes), title="t", body="b")

    assert limit.allow(notice("slot_trouble:us", 0))
    assert not limit.allow(notice("slot_trouble:us", 5))  # the same key too soon
    assert limit.allow(notice("slot_trouble:cn", 5))  # another market
    assert limit.allow(notice("slot_trouble:us", 15))
    assert not limit.allow(notice("digest", 20))  # three in the hour already
    assert limit.allow(notice("digest", 61))


def test_drawdown_is_the_fall_from_the_peak() -> None:
    assert drawdown([Decimal(100), Decimal(120), Decimal(90)]) == Decimal("0.25")
    assert drawdown([Decimal(100), Decimal(110)]) == 0
    assert drawdown([]) == 0


def test_slot_trouble_is_sent_with_its_cause_and_rate_limited(engine: Engine) -> None:
    notes, sent = notifications(engine)
    notes.take(trouble("us", AT, message="Name or service not known", cycles={"skipped": 5}))
    notes.take(trouble("us", AT + timedelta(minutes=1)))  # held back
    notes.take(DaemonEvent(kind="slot_finished", at=AT, market="cn", fields={"state": "done"}))
    assert notes.close(timeout_s=10)
    assert [notice.title for notice in sent] == ["openbell us: slot data_unavailable"]
    assert "data_unavailable (dns)" in sent[0].body
    assert "Name or service not known" in sent[0].body
    assert "cycles: skipped 5" in sent[0].body


def test_a_drawdown_is_said_once_and_a_spent_budget_from_the_trace(
    engine: Engine, ledger: Ledger
) -> None:
    built = build_ledger(ledger)
    # An account of the built ledger that ends below its peak.
    (market, agent), navs = next(
        (key, navs) for key, navs in built.navs.items() if drawdown(navs) > 0
    )
    alpha = built.accounts[(market, agent)]
    depth = drawdown(navs)
    slot_at = max(SLOTS[-1], CRYPTO_SLOTS[-1]) + timedelta(days=1)
    # An LLM agent whose cycle's loop ended on its tool-call budget, and a baseline whose trace
    # says the same (no model, no budget: not reported).
    llm = ledger.open_account(
        ledger.ensure_agent("gpt", "llm", slot_at), market, "USD", Decimal(10000), slot_at
    )
    for account_id in (llm, alpha):
        cycle_id = ledger.claim_cycle(
            account_id, slot_at, "test", slot_at + timedelta(minutes=5), slot_at
        )
        assert cycle_id is not None
        stop = TraceEntry(cycle_id=cycle_id, role="stop", at=slot_at, content="max_tool_calls")
        changed = TraceEntry(
            cycle_id=cycle_id,
            role="model_changed",
            at=slot_at,
            content="the model answered as m2 (before: m1)",
        )
        ledger.append_journal(cycle_id, [changed, stop])
        ledger.finish_cycle(cycle_id, CycleStatus.DONE, slot_at)
    pct = float(depth * 100) / 2
    notes, sent = notifications(engine, drawdown_pct=pct, min_interval=timedelta(0))
    done = {"slot_at": slot_at.isoformat(), "state": "done", "account_ids": [alpha, llm]}
    for hours in (0, 1):
        at = slot_at + timedelta(hours=hours)
        notes.take(DaemonEvent(kind="slot_finished", at=at, market=market, fields=done))
    assert notes.close(timeout_s=10)
    titles = [notice.title for notice in sent]
    assert titles.count(f"openbell {market}: {agent} in drawdown") == 1
    assert titles.count(f"openbell {market}: gpt ran out of budget") == 2  # each slot's
    assert titles.count(f"openbell {market}: {agent} ran out of budget") == 0
    assert "ended on max_tool_calls" in sent[-1].body
    # The model change is the LLM account's only: a baseline's row of the same is not read.
    changed = [notice for notice in sent if "model changed" in notice.title]
    assert [notice.title for notice in changed] == [f"openbell {market}: gpt's model changed"] * 2
    assert "the model answered as m2 (before: m1)" in changed[0].body
    # Left out of `events`, neither is sent.
    quiet, none_sent = notifications(engine, events=("drawdown",), min_interval=timedelta(0))
    quiet.take(DaemonEvent(kind="slot_finished", at=slot_at, market=market, fields=done))
    assert quiet.close(timeout_s=10)
    assert not [n for n in none_sent if "budget" in n.title or "model" in n.title]


def test_stale_health_once_until_it_clears_and_the_digest_once_a_day(engine: Engine) -> None:
    notes, sent = notifications(engine, digest_at="12:30", min_interval=timedelta(0))
    overdue = {"us": AT.isoformat()}
    for minutes, late in ((0, overdue), (10, overdue), (20, {}), (25, overdue)):
        at = AT + timedelta(minutes=minutes)
        notes.take(DaemonEvent(kind="health", at=at, fields={"overdue": late}))
    for minutes in (31, 40, 24 * 60 + 29, 24 * 60 + 31):
        notes.take(DaemonEvent(kind="health", at=AT + timedelta(minutes=minutes), fields={}))
    assert notes.close(timeout_s=10)
    titles = [notice.title for notice in sent]
    assert titles.count("openbell us: health stale") == 2  # at 12:00 and again at 12:25
    digests = [notice for notice in sent if notice.key == "digest"]
    assert [notice.at for notice in digests] == [
        AT + timedelta(minutes=31),
        AT + timedelta(minutes=24 * 60 + 31),
    ]
    assert digests[0].body == "us board"
