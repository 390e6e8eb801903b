"""The web pages in Debian's Chromium over the demo's ledger: the arena's leaderboards are the
CLI's, an agent's page leads to its orders' cycles, and a page updates itself when a slot ends."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, expect

from openbell.ops.reports.figures import figure
from openbell_testkit.arena_writes import last_slot, ledger_of, rejected_order_cycle
from openbell_testkit.cli import openbell
from openbell_testkit.web import Seen, Shoot, serve_ledger

#: The arena's columns after the sparkline, each the record key it shows (the significance
#: suite's `dsr` and `adjusted_p_value_best` from the `--wide` board's `significance` rows).
ARENA_KEYS = (
    "final_nav",
    "composite",
    "dsr",
    "adjusted_p_value_best",
    "cumulative_return",
    "max_drawdown",
    "sortino_ratio",
    "z_cumulative_return",
    "z_max_drawdown",
    "z_sortino_ratio",
    "trades",
    "cost_per_decision",
)


def cli_leaderboards(db: Path, cwd: Path) -> list[dict[str, Any]]:
    """The CLI's boards, each row with its significance suite's figures (`--wide`)."""
    result = openbell(cwd, "leaderboard", "--db", str(db), "--format", "json", "--wide")
    assert result.returncode == 0, result.stderr
    boards: list[dict[str, Any]] = json.loads(result.stdout)["leaderboards"]
    for board in boards:
        suite = {row["name"]: row for row in board["significance"]["rows"]}
        for row in board["rows"]:
            found = suite.get(row["name"], {}) if not row["is_benchmark"] else {}
            row["dsr"] = found.get("dsr")
            row["adjusted_p_value_best"] = found.get("adjusted_p_value_best")
            row["immature"] = found.get("immature", False)
    return boards


def shown_rows(page: Page, market: str) -> list[list[str]]:
    rows = page.locator(f"#market-{market} tbody tr")
    cells: list[list[str]] = rows.evaluate_all(
        "rows => rows.map(r => Array.from(r.cells, c => c.textContent.trim()))"
    )
    return cells


def expected_row(record: dict[str, Any]) -> list[str]:
    rank = "" if record["rank"] is None else str(record["rank"])
    name = record["name"] + (" immature" if record["immature"] else "")
    places = {"dsr": 3, "adjusted_p_value_best": 4}
    return [
        rank,
        name,
        "",
        *(
            figure(key, record[key])
            if key not in places or record[key] is None
            else f"{record[key]:.{places[key]}f}"
            for key in ARENA_KEYS
        ),
    ]


def test_the_arena_shows_the_clis_leaderboards(
    demo_site: str, demo_db: Path, tab: Page, seen: Seen, shoot: Shoot, tmp_path: Path
) -> None:
    boards = cli_leaderboards(demo_db, tmp_path)
    response = tab.goto(demo_site + "/")
    assert response is not None
    assert response.status == 200
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert [board["market"] for board in boards] == ["us", "cn", "crypto"]
    for board in boards:
        assert shown_rows(tab, board["market"]) == [expected_row(r) for r in board["rows"]]
        agents = tab.locator(f"#market-{board['market']} tbody tr.agent")
        assert agents.count() == len([r for r in board["rows"] if not r["is_benchmark"]])
        for i in range(agents.count()):  # a sparkline of the agent's NAV on every agent row
            points = agents.nth(i).locator("svg.spark polyline").get_attribute("points") or ""
            assert len(points.split()) >= 2
    shoot(tab, "arena")
    seen.assert_nothing()


def test_agent_then_order_then_cycle_by_clicking(
    demo_site: str, demo_db: Path, tab: Page, seen: Seen, shoot: Shoot, tmp_path: Path
) -> None:
    us = next(b for b in cli_leaderboards(demo_db, tmp_path) if b["market"] == "us")
    record = next(r for r in us["rows"] if r["agent"] == "equal-weight")
    tab.goto(demo_site + "/")
    tab.locator("#market-us").get_by_role("link", name="equal-weight", exact=True).click()
    expect(tab).to_have_url(demo_site + "/markets/us/agents/equal-weight")
    expect(tab.locator("h1")).to_have_text("equal-weight")
    chart = tab.locator("svg.chart.equity")
    expect(chart).to_be_visible()
    assert len((chart.locator("polyline.nav").get_attribute("points") or "").split()) > 10
    assert chart.locator("polyline.benchmark").count() == 2  # equity and drawdown panels
    assert re.search(r"\d{4}-\d\d-\d\d", chart.text_content() or "")  # session dates
    panel = tab.locator("dl.panel div", has_text="cumulative return %").locator("dd")
    expect(panel).to_have_text(figure("cumulative_return", record["cumulative_return"]))
    assert tab.locator("section.positions tbody tr").count() > 0
    orders = tab.locator("section.orders tbody tr.order")
    assert orders.count() > 0
    first = orders.first
    reason = (first.locator("td.reason").text_content() or "").strip()
    symbol = (first.locator("td").nth(1).text_content() or "").strip()
    shoot(tab, "agent")
    first.locator("a.cycle-link").click()
    expect(tab).to_have_url(re.compile(re.escape(demo_site) + r"/cycles/\d+$"))
    expect(tab.locator("h1")).to_have_text(re.compile(r"^Cycle \d+$"))
    same = tab.locator("section.orders tbody tr.order", has_text=symbol).first
    expect(same.locator("td.reason")).to_have_text(reason)
    shoot(tab, "cycle")
    tab.get_by_role("link", name="equal-weight").first.click()
    expect(tab).to_have_url(demo_site + "/markets/us/agents/equal-weight")
    seen.assert_nothing()


PHONE = {"width": 390, "height": 844}


#: What of a page's tables a phone does not show whole: a table scrolling inside its card (cut
#: at the card's edge), a cell hidden or past the screen's edge, a cell without its column's name.
CUT_TABLES = """() => {
  const width = document.documentElement.clientWidth;
  const cut = [];
  for (const box of document.querySelectorAll(".scroll")) {
    if (box.scrollWidth > box.clientWidth + 1) cut.push("scrolls: " + box.innerText.slice(0, 40));
  }
  for (const cell of document.querySelectorAll("td")) {
    const label = cell.dataset.label;
    if (!label) cut.push("unlabelled: " + cell.innerText.slice(0, 40));
    if (getComputedStyle(cell).display === "none") cut.push("hidden: " + label);
    else if (cell.getBoundingClientRect().right > width + 1) cut.push("cut: " + label);
  }
  return cut;
}"""


def test_the_pages_fit_a_phone(demo_site: str, chromium: Browser, seen: Seen) -> None:
    """Issue 28 (9): on a phone every table is whole: no table scrolls in its card, no cell is
    hidden or cut, each cell says its column (the tables become cards)."""
    context = chromium.new_context(viewport=PHONE, is_mobile=True)  # type: ignore[arg-type]
    phone = context.new_page()
    phone.on("console", seen.console)
    for path in (
        "/",
        "/markets/us",
        "/?spark=shared",
        "/markets/cn/agents/buy-and-hold",
        "/markets/us/agents/equal-weight",
        "/cycles/1",
    ):
        phone.goto(demo_site + path)
        expect(phone.locator("h1")).to_be_visible()
        assert phone.locator("td").count() > 0, path
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], path
        assert phone.evaluate(CUT_TABLES) == [], path
    # The z-columns, hidden on a phone before, are shown with their names.
    phone.goto(demo_site + "/markets/us")
    z = phone.locator("tr.agent").first.locator("td[data-label='z return']")
    expect(z).to_be_visible()
    context.close()
    seen.assert_nothing()


def test_the_arena_explains_its_ranking_and_says_nobody_writes_the_demo(
    demo_site: str, tab: Page, seen: Seen
) -> None:
    """Issue 28 (9): a replayed ledger served read-only is not "live"; the composite and the
    z-columns are explained on the page, and so is the significance suite (issue 27);
    `/markets/us` is the US board."""
    tab.goto(demo_site + "/")
    expect(tab.locator("header.top .read-only")).to_have_text("read-only ledger")
    assert tab.locator("header.top .live").count() == 0
    explain = tab.locator("details.explain").first
    explain.locator("summary").click()
    expect(explain).to_contain_text("mean of the three z-scores")
    suite = tab.locator("details#significance")
    suite.locator("summary").click()
    expect(suite).to_contain_text("deflated Sharpe ratio")
    expect(suite).to_contain_text("docs/guide/significance.md")
    expect(tab.locator("#market-us .significance-note")).to_contain_text("DSR over N=")
    tab.locator("#market-us h2 a").click()
    expect(tab).to_have_url(demo_site + "/markets/us")
    assert tab.locator("section.leaderboard").count() == 1
    tab.locator("a.spark-scale").click()
    expect(tab).to_have_url(demo_site + "/markets/us?spark=shared")
    seen.assert_nothing()


def test_unknown_agents_and_cycles_are_not_found(demo_site: str, tab: Page) -> None:
    for path in ("/markets/us/agents/nobody", "/markets/mars/agents/cash", "/cycles/987654"):
        response = tab.goto(demo_site + path)
        assert response is not None
        assert response.status == 404, path
        expect(tab.locator("h1")).to_have_text("Not found")


def test_a_page_updates_without_a_reload_when_a_slot_finishes(
    own_db: Path, tab: Page, seen: Seen
) -> None:
    at = last_slot(own_db, "us", "cash") + timedelta(hours=1)
    with serve_ledger(own_db, poll_interval_s=0.2) as site:
        tab.goto(site + "/markets/us/agents/cash")
        expect(tab.locator("section.orders")).to_contain_text("No orders yet.")
        tab.evaluate("window.__loaded_once = true")
        rejected_order_cycle(
            ledger_of(own_db),
            agent="cash",
            kind="cash",
            market="us",
            at=at,
            reason="a late idea, refused",
        )
        expect(tab.locator("section.orders td.reason")).to_have_text(
            "a late idea, refused", timeout=10_000
        )
        assert tab.evaluate("window.__loaded_once") is True  # the same document: no reload
        assert int(tab.locator("body").get_attribute("data-refreshes") or 0) >= 1
    seen.assert_nothing()
