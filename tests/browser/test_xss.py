"""Text an agent wrote stays text in a real browser: an order reason and a model's reasoning full
of script, an `onerror` image and `javascript:` links are shown as written, and nothing runs."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from playwright.sync_api import Page, expect

from openbell.store.records import CycleUsage
from openbell_testkit.arena_writes import last_slot, ledger_of, rejected_order_cycle
from openbell_testkit.web import Seen, serve_ledger

HOSTILE = (
    "<script>window.__xss=1</script> "
    '<img src=x onerror="window.__xss=1"> '
    '<a href="javascript:window.__xss=1">details</a> '
    "[read more](javascript:window.__xss=1) javascript:window.__xss=1 "
    "<script>alert('xss')</script>"
)
REASONING = "I will buy.\n" + HOSTILE + '\n<svg onload="window.__xss=1"></svg>'


def assert_inert(tab: Page, seen: Seen) -> None:
    """Nothing the agent wrote ran or became an element or a link."""
    assert tab.evaluate("window.__xss") is None
    assert tab.locator("img").count() == 0
    assert tab.locator("script").count() == 1  # our own live.js, from /static
    assert tab.locator("script").get_attribute("src") == "/static/live.js"
    hrefs: list[str] = tab.evaluate(
        "Array.from(document.querySelectorAll('[href]'), e => e.getAttribute('href'))"
    )
    assert hrefs
    # our routes, or a fragment naming one of the page's own sections (`#significance`)
    assert all(href.startswith("/") or re.fullmatch(r"#[a-z-]+", href) for href in hrefs), hrefs
    seen.assert_nothing()  # no dialog, no error, and no script even tried (no CSP violation)


def test_agent_text_is_shown_as_text_and_never_runs(own_db: Path, tab: Page, seen: Seen) -> None:
    at = last_slot(own_db, "us", "cash")
    cycle_id = rejected_order_cycle(
        ledger_of(own_db),
        agent="hostile-llm",
        kind="llm",
        market="us",
        at=at,
        reason=HOSTILE,
        trace=(("reasoning", REASONING), ("assistant", HOSTILE)),
        usage=CycleUsage(tokens_in=1200, tokens_out=300, cost=Decimal("0.0123")),
    )
    with serve_ledger(own_db, poll_interval_s=0.2) as site:
        tab.goto(site + "/")
        row = tab.locator("#market-us tbody tr", has_text="hostile-llm")
        expect(row.locator("td.cost_per_decision")).to_have_text("0.0123")
        assert_inert(tab, seen)

        row.get_by_role("link", name="hostile-llm").click()
        reason = tab.locator("section.orders td.reason")
        expect(reason).to_be_visible()
        expect(reason).to_have_text(HOSTILE)
        tab.get_by_text("javascript:window.__xss=1", exact=False).first.click()
        assert_inert(tab, seen)

        tab.locator("section.orders a.cycle-link").click()
        expect(tab).to_have_url(f"{site}/cycles/{cycle_id}")
        reasoning = tab.locator("article.reasoning pre.content")
        expect(reasoning).to_be_visible()
        assert reasoning.inner_text() == REASONING
        expect(tab.locator("article.assistant pre.content")).to_have_text(HOSTILE)
        expect(tab.locator("article.tool pre.result")).to_have_text(HOSTILE)
        expect(tab.locator("section.orders td.reason")).to_have_text(HOSTILE)
        assert_inert(tab, seen)


def test_agent_text_arriving_live_stays_inert(own_db: Path, tab: Page, seen: Seen) -> None:
    with serve_ledger(own_db, poll_interval_s=0.2) as site:
        tab.goto(site + "/markets/us/agents/cash")
        rejected_order_cycle(
            ledger_of(own_db),
            agent="cash",
            kind="cash",
            market="us",
            at=last_slot(own_db, "us", "cash") + timedelta(hours=1),
            reason=HOSTILE,
        )
        expect(tab.locator("section.orders td.reason")).to_have_text(HOSTILE, timeout=10_000)
        assert int(tab.locator("body").get_attribute("data-refreshes") or 0) >= 1
        assert_inert(tab, seen)
