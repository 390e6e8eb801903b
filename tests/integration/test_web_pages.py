"""The web pages over a real ledger (SQLite and Postgres), through Starlette's test client: every
page answers with its security headers, only GET and HEAD, agent text escaped in the HTML, links
only to our own routes, the static files of the installed package, and a live stamp that moves
when the ledger does. What reads the ledger differently per engine runs on both; the routing and
static files once, on SQLite. The browser tests (tests/browser) look at the pages in Chromium."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.testclient import TestClient

from openbell.markets.domain import Instrument, Order, Rejection, RejectReason, Side
from openbell.ops.web.pages import PAGE_HEADERS, page_routes
from openbell.store.ledger import Ledger
from openbell.store.records import CycleStatus, SnapshotKind, TraceEntry
from openbell_testkit.reports import SLOTS, Built, build_ledger

HOSTILE = '<script>window.__xss=1</script><img src=x onerror="alert(1)"><a href="javascript:x()">'
PAGES = (
    "/",
    "/markets/us",
    "/markets/crypto",
    "/markets/us/agents/gamma",
    "/markets/crypto/agents/alpha",
)


@pytest.fixture
def built(ledger: Ledger) -> Built:
    return build_ledger(ledger)


@pytest.fixture
def client(engine: Engine, built: Built) -> TestClient:
    return TestClient(Starlette(routes=page_routes(engine)))


def _hostile_cycle(ledger: Ledger, account_id: int) -> int:
    at = SLOTS[-1] + timedelta(days=1)
    cycle_id = ledger.claim_cycle(account_id, at, "test", at + timedelta(minutes=5), at)
    assert cycle_id is not None
    ledger.append_journal(
        cycle_id, [TraceEntry(cycle_id=cycle_id, role="reasoning", at=at, content=HOSTILE)]
    )
    order = Order(
        instrument=Instrument(symbol="AAPL", market="us", currency="USD"),
        side=Side.BUY,
        quantity=Decimal(1),
        placed_at=at,
        reason=HOSTILE,
    )
    rejection = Rejection(reason=RejectReason.MARKET_CLOSED, message=HOSTILE, at=at)
    ledger.record_order(cycle_id=cycle_id, seq=0, order=order, outcome=rejection)
    ledger.finish_cycle(cycle_id, CycleStatus.DONE, at)
    return cycle_id


def test_every_page_is_html_with_its_security_headers(client: TestClient, built: Built) -> None:
    for path in (*PAGES, "/cycles/1"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith("text/html")
        for name, value in PAGE_HEADERS.items():
            assert response.headers[name] == value, (path, name)
        head = client.head(path)
        assert head.status_code == 200
        assert head.content == b""


@pytest.mark.sqlite_only
def test_the_pages_are_read_only(client: TestClient) -> None:
    for path in (*PAGES, "/cycles/1", "/live/stamp"):
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            assert client.request(method, path).status_code == 405, (method, path)


@pytest.mark.sqlite_only
def test_unknown_names_are_not_found(client: TestClient) -> None:
    for path in (
        "/markets/us/agents/nobody",
        "/markets/xx/agents/alpha",
        "/cycles/424242",
        "/markets/cn",  # a market without accounts
        "/markets/mars",
    ):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "Not found" in response.text
    assert client.get("/cycles/abc").status_code == 404


@pytest.mark.sqlite_only
def test_the_static_files_come_from_the_installed_package(client: TestClient) -> None:
    for name, kind in (
        ("live.js", "javascript"),
        ("arena.css", "text/css"),
        ("favicon.svg", "image/svg+xml"),
    ):
        response = client.get(f"/static/{name}")
        assert response.status_code == 200, name
        assert kind in response.headers["content-type"]
    assert "data-stamp-url" in client.get("/static/live.js").text
    assert client.get("/static/../pages.py").status_code == 404
    assert client.get("/static/%2e%2e/pages.py").status_code == 404


def test_agent_text_is_escaped_and_links_stay_ours(
    client: TestClient, ledger: Ledger, built: Built
) -> None:
    cycle_id = _hostile_cycle(ledger, built.accounts["us", "gamma"])
    for path in ("/markets/us/agents/gamma", f"/cycles/{cycle_id}"):
        html = client.get(path).text
        assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html
        assert "<script>window" not in html
        assert "<img" not in html
        assert "javascript:x()" in html  # shown, as text
        hrefs = re.findall(r'(?:href|src)="([^"]*)"', html)
        assert hrefs
        assert all(href.startswith("/") for href in hrefs), hrefs
    agent = client.get("/markets/us/agents/gamma").text
    assert f'href="/cycles/{cycle_id}"' in agent


@pytest.mark.sqlite_only
def test_the_agent_page_links_each_order_and_fill_to_its_cycle(
    client: TestClient, ledger: Ledger, built: Built
) -> None:
    html = client.get("/markets/us/agents/gamma").text
    rows = re.findall(r'data-order-id="(\d+)".*?href="/cycles/(\d+)"', html, flags=re.DOTALL)
    assert len(rows) == 3  # gamma's buy, its rejected buy and its sell
    for order_id, cycle_id in rows:
        orders = ledger.cycle_orders(int(cycle_id))
        assert [o.order_id for o in orders] == [int(order_id)]
    fills = re.findall(r'<tr class="fill">.*?href="/cycles/(\d+)"', html, flags=re.DOTALL)
    assert len(fills) == 2  # the buy's and the sell's
    for cycle_id in fills:
        (order,) = ledger.cycle_orders(int(cycle_id))
        assert order.fill_id is not None


def test_the_agent_page_shows_its_factor_attribution(client: TestClient, built: Built) -> None:
    html = client.get("/markets/us/agents/gamma").text
    section = html.split('<section class="card attribution">', 1)[1].split("</section>", 1)[0]
    rows = re.findall(r"<tr><td[^>]*>(\w+)</td><td class=\"num\"[^>]*>([-\d.]+)</td>", section)
    parts = [part for part, _ in rows]
    assert parts[0] == "market"
    assert parts[-3:] == ["selection", "trading", "total"]
    navs = built.navs["us", "gamma"]
    assert dict(rows)["total"] == f"{float(navs[-1] / navs[0] - 1) * 100:.2f}"
    assert "size (no point-in-time fundamentals)" in section


def test_the_live_stamp_moves_with_the_ledger(
    client: TestClient, ledger: Ledger, built: Built
) -> None:
    first = client.get("/live/stamp").text
    assert client.get("/live/stamp").text == first
    assert f'data-stamp="{first}"' in client.get("/").text
    account_id = built.accounts["us", "beta"]
    at = SLOTS[-1] + timedelta(days=1)
    cycle_id = ledger.claim_cycle(account_id, at, "test", at + timedelta(minutes=5), at)
    assert cycle_id is not None
    claimed = client.get("/live/stamp").text
    assert claimed != first
    ledger.write_nav_snapshot(account_id, at, SnapshotKind.SLOT, {})
    snapshot = client.get("/live/stamp").text
    assert snapshot != claimed
    ledger.finish_cycle(cycle_id, CycleStatus.DONE, at)
    assert client.get("/live/stamp").text not in {first, claimed, snapshot}


def test_an_empty_ledger_and_a_new_account_show_plainly(engine: Engine, ledger: Ledger) -> None:
    client = TestClient(Starlette(routes=page_routes(engine)))
    assert "No accounts in the ledger yet." in client.get("/").text
    agent_id = ledger.ensure_agent("fresh", "cash", SLOTS[0])
    ledger.open_account(agent_id, "us", "USD", Decimal(10000), SLOTS[0])
    arena = client.get("/")
    assert arena.status_code == 200
    assert 'href="/markets/us/agents/fresh"' in arena.text
    page = client.get("/markets/us/agents/fresh")
    assert page.status_code == 200
    for said in ("no NAV snapshots yet", "No open positions.", "No orders yet.", "No cycles yet."):
        assert said in page.text


def _board_markets(html: str) -> list[str]:
    return re.findall(r'<section class="card leaderboard" id="market-(\w+)"', html)


def test_a_market_page_shows_its_board_alone(client: TestClient) -> None:
    """Issue 28 (9): `/markets/us` is the arena's US board, not a 404; each board links to it."""
    arena = client.get("/").text
    assert _board_markets(arena) == ["us", "crypto"]
    assert 'href="/markets/us"' in arena
    us = client.get("/markets/us")
    assert us.status_code == 200
    assert _board_markets(us.text) == ["us"]
    assert "<h1>US equities</h1>" in us.text
    assert _board_markets(client.get("/markets/crypto").text) == ["crypto"]


def test_the_live_mark_shows_only_while_a_daemon_writes(engine: Engine, built: Built) -> None:
    """Issue 28 (9): a ledger nobody writes is "read-only", not "live"; the answer is asked at
    each page, so a daemon starting or stopping changes it."""
    writing = [False]
    client = TestClient(Starlette(routes=page_routes(engine, live=lambda: writing[0])))
    for path in ("/", "/markets/us/agents/gamma", "/cycles/1"):
        html = client.get(path).text
        assert 'class="read-only"' in html, path
        assert 'class="live"' not in html, path
    writing[0] = True
    html = client.get("/").text
    assert 'class="live"' in html
    assert 'class="read-only"' not in html
    default = TestClient(Starlette(routes=page_routes(engine))).get("/").text
    assert 'class="live"' not in default


@pytest.mark.sqlite_only
def test_sparklines_share_a_scale_when_asked(client: TestClient) -> None:
    own = client.get("/markets/us").text
    shared = client.get("/markets/us?spark=shared").text
    assert 'href="/markets/us?spark=shared"' in own
    assert 'class="spark-scale" href="/markets/us"' in shared

    def heights(html: str) -> list[tuple[float, float]]:
        out = []
        for points in re.findall(r'<polyline class="spark \w+" points="([^"]+)"', html):
            ys = [float(pair.split(",")[1]) for pair in points.split()]
            out.append((min(ys), max(ys)))
        return out

    # Each line its own height: every moving line spans the whole box; shared: one range.
    assert len(heights(own)) == len(heights(shared)) >= 2
    assert heights(own) != heights(shared)
    assert min(low for low, _ in heights(shared)) == 1.0
    assert max(high for _, high in heights(shared)) == 27.0


def test_tool_arguments_read_as_named_values_and_stay_escaped(
    client: TestClient, ledger: Ledger, built: Built
) -> None:
    """Issue 28 (9): a tool call's JSON arguments are shown as name and value, the text itself
    (no quotes, no `\\u003c` escapes), and still HTML-escaped; arguments that are not a JSON
    object are shown as stored, escaped."""
    account_id = built.accounts["us", "gamma"]
    at = SLOTS[-1] + timedelta(days=1)
    cycle_id = ledger.claim_cycle(account_id, at, "test", at + timedelta(minutes=5), at)
    assert cycle_id is not None
    arguments = json.dumps({"symbol": HOSTILE, "shares": 3, "symbols": ["AAPL", "MSFT"]})
    entries = [
        TraceEntry(cycle_id=cycle_id, role="tool", at=at, tool="place_order", arguments=arguments),
        TraceEntry(cycle_id=cycle_id, role="tool", at=at, tool="get_quote", arguments=HOSTILE),
    ]
    ledger.append_journal(cycle_id, entries)
    html = client.get(f"/cycles/{cycle_id}").text
    assert "<dt>symbol</dt><dd>&lt;script&gt;window.__xss=1&lt;/script&gt;" in html
    assert "<dt>shares</dt><dd>3</dd>" in html
    assert "<dt>symbols</dt><dd>[&#34;AAPL&#34;, &#34;MSFT&#34;]</dd>" in html
    assert "\\u003c" not in html
    assert '<pre class="arguments">&lt;script&gt;window.__xss=1' in html
    assert "<script>window" not in html
    assert "<img" not in html
