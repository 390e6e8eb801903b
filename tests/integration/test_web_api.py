"""The JSON API under /api/v1 over a real ledger: the demo's replay of the US and crypto markets.

The API must print the CLI's numbers (`openbell leaderboard --format json`, `report --json`,
`positions --format json`, `trace --json`, run as the real console script on the same ledger),
walk every order, fill and cycle of an account exactly once page by page, carry the ledger's
decimals exactly as text, answer bad parameters with a 400 and unknown names with a 404 (a JSON
error document each time), refuse anything but GET and HEAD, and match its OpenAPI document.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from sqlmodel import col
from starlette.applications import Starlette
from starlette.testclient import TestClient

from openbell.daemon.http import Lifespan
from openbell.markets.domain import utc
from openbell.markets.errors import ReportError
from openbell.ops.config.schema import load_config
from openbell.ops.evaluation.attribution.exposures import NO_AMOUNT, NO_FUNDAMENTALS, STYLE_SETS
from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.ops.seasons.code_version import CodeVersion
from openbell.ops.seasons.opening import new_season
from openbell.ops.web import read_model
from openbell.ops.web.api import api_app, api_routes
from openbell.ops.web.app import web_parts
from openbell.ops.web.memo import ViewMemo
from openbell.ops.web.openapi import RESPONSE_MODELS, openapi_document
from openbell.ops.web.schemas import ErrorDocument
from openbell.ops.wiring.demo import DEMO_MARKETS, demo_config, run_demo
from openbell.ops.wiring.planning import attribution_choice, replay_from_config
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.records import CycleUsage, TraceEntry
from openbell.store.seasons import open_season
from openbell.store.tables import AccountRow, AgentRow, CycleRow, FillRow, NavSnapshotRow, OrderRow
from openbell_testkit.cli import openbell

START, END = date(2025, 10, 1), date(2025, 10, 10)
#: The demo's US (hourly) and crypto (daily) markets over ten days: every baseline in each.
MARKETS = tuple(
    dataclasses.replace(spec, start=START, end=END)
    for spec in DEMO_MARKETS
    if spec.market in {"us", "crypto"}
)
#: Texts an agent could write: the API returns them as they are (pages render them inert).
HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)"><a href="javascript:x()">x</a>'


@dataclass(frozen=True)
class Demo:
    db: Path
    engine: Engine
    client: TestClient
    traced_cycle: int


def _traced_cycle(engine: Engine) -> int:
    """A cycle of `random` in the US that placed orders, given a model's trace and usage."""
    with engine.connect() as connection:
        cycle_id: int = connection.execute(
            select(col(OrderRow.cycle_id))
            .join(AccountRow, col(AccountRow.id) == OrderRow.account_id)
            .join(AgentRow, col(AgentRow.id) == AccountRow.agent_id)
            .where(col(AgentRow.name) == "random", col(AccountRow.market) == "us")
            .order_by(col(OrderRow.id))
            .limit(1)
        ).scalar_one()
    at = utc(2025, 10, 1, 14)
    entries = [
        TraceEntry(cycle_id=cycle_id, role="user", at=at, content="prices: AAPL 255.10"),
        TraceEntry(cycle_id=cycle_id, role="reasoning", at=at, content=HOSTILE),
        TraceEntry(
            cycle_id=cycle_id,
            role="tool",
            at=at,
            tool="place_order",
            arguments='{"symbol": "AAPL"}',
            result=HOSTILE,
            tokens_in=120,
            tokens_out=30,
            latency_ms=410,
        ),
    ]
    usage = CycleUsage(tokens_in=120, tokens_out=30, cost=Decimal("0.0012345"), llm_attempts=1)
    Ledger(engine).append_journal(cycle_id, entries, usage)
    return cycle_id


def _open_later_season(engine: Engine, db: Path) -> None:
    """A season of the demo's config after the demo's window (so its card is of no slot yet):
    the boards name it, `/api/v1/seasons/later` serves it."""
    season = new_season(
        demo_config(db, MARKETS),
        name="later",
        start=date(2025, 10, 20),
        end=date(2025, 10, 31),
        config_text="# the demo's config, built in code\n",
        config_path=db.parent / "openbell.toml",
        code=CodeVersion(version="test", commit="unknown"),
        now=utc(2025, 10, 11),
    )
    open_season(engine, season)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    db = tmp_path_factory.mktemp("web-api") / "demo.db"
    run_demo(db, MARKETS)
    engine = make_engine(f"sqlite:///{db}")
    traced = _traced_cycle(engine)
    _open_later_season(engine, db)
    with TestClient(Starlette(routes=api_routes(engine))) as client:
        yield Demo(db=db, engine=engine, client=client, traced_cycle=traced)
    engine.dispose()


def _get(demo: Demo, url: str) -> Any:
    response = demo.client.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


def _cli_json(demo: Demo, *args: str) -> Any:
    result = openbell(demo.db.parent, *args, "--db", str(demo.db))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _account_id(engine: Engine, agent: str, market: str) -> int:
    with engine.connect() as connection:
        found: int = connection.execute(
            select(col(AccountRow.id))
            .join(AgentRow, col(AgentRow.id) == AccountRow.agent_id)
            .where(col(AgentRow.name) == agent, col(AccountRow.market) == market)
        ).scalar_one()
    return found


def test_markets_lists_each_market_with_its_accounts_and_last_slot(demo: Demo) -> None:
    found = _get(demo, "/api/v1/markets")["markets"]
    assert [market["market"] for market in found] == ["us", "crypto"]
    with demo.engine.connect() as connection:
        for market in found:
            last = connection.execute(
                select(col(CycleRow.slot_at))
                .join(AccountRow, col(AccountRow.id) == CycleRow.account_id)
                .where(col(AccountRow.market) == market["market"])
                .order_by(col(CycleRow.slot_at).desc())
                .limit(1)
            ).scalar_one()
            assert datetime.fromisoformat(market["last_slot_at"]) == last
            assert market["accounts"] == len(market["agents"]) == 5
    assert [(m["currency"], m["benchmark"]) for m in found] == [("USD", "QQQ"), ("USDT", "CD5")]


def test_leaderboard_equals_the_cli_json(demo: Demo) -> None:
    boards = _cli_json(demo, "leaderboard", "--format", "json")["leaderboards"]
    assert [board["market"] for board in boards] == ["us", "crypto"]
    for board in boards:
        assert _get(demo, f"/api/v1/leaderboard/{board['market']}") == board
        assert board["season"]["name"] == "later"  # the ledger's season, named on each board


def test_significance_equals_the_cli_wide_json(demo: Demo) -> None:
    (board,) = _cli_json(demo, "leaderboard", "-m", "crypto", "--wide", "-f", "json")[
        "leaderboards"
    ]
    found = board["significance"]
    assert _get(demo, "/api/v1/leaderboard/crypto/significance") == found
    assert found["correction"] == "holm"
    assert found["trials"] == 5  # the demo's five baselines
    assert {row["name"] for row in found["rows"]} == {
        row["name"] for row in board["rows"] if not row["is_benchmark"]
    }
    assert all(row["comparisons"] == [] for row in found["rows"])  # baselines only


def test_a_windowed_leaderboard_equals_the_cli_over_the_same_days(demo: Demo) -> None:
    cli = _cli_json(
        demo,
        "leaderboard",
        "-m",
        "us",
        "--start",
        "2025-10-02",
        "--end",
        "2025-10-07",
        "-f",
        "json",
    )["leaderboards"]
    api = _get(demo, "/api/v1/leaderboard/us?start=2025-10-02&end=2025-10-07")
    assert api == cli[0]
    assert api["rows"] != _get(demo, "/api/v1/leaderboard/us")["rows"]
    # `3d`: the three UTC days ending with the day of the market's last slot (2025-10-10).
    trailing = _cli_json(
        demo,
        "leaderboard",
        "-m",
        "us",
        "--start",
        "2025-10-08",
        "--end",
        "2025-10-10",
        "-f",
        "json",
    )["leaderboards"][0]
    assert _get(demo, "/api/v1/leaderboard/us?window=3d") == trailing


def test_metrics_positions_and_account_equal_the_cli(demo: Demo) -> None:
    report = _cli_json(demo, "report", "random", "-m", "us", "--json")
    assert _get(demo, "/api/v1/agents/random/us/metrics") == report
    positions = _cli_json(demo, "positions", "-m", "us", "--format", "json")["accounts"]
    (mine,) = [found for found in positions if found["agent"] == "random"]
    assert _get(demo, "/api/v1/agents/random/us/positions") == mine
    account = _get(demo, "/api/v1/agents/random/us")
    assert account["account"]["account_id"] == mine["account_id"]
    for name, url in account["links"].items():
        assert url == f"/api/v1/agents/random/us/{name}"
        demo.client.get(url).raise_for_status()


def test_attribution_equals_the_cli_and_its_parts_sum(demo: Demo) -> None:
    for market, window in (("crypto", ""), ("us", "?start=2025-10-02&end=2025-10-08")):
        cli = ["--start", "2025-10-02", "--end", "2025-10-08"] if window else []
        report = _cli_json(demo, "report", "random", "-m", market, "--attribution", "--json", *cli)
        found = _get(demo, f"/api/v1/agents/random/{market}/attribution{window}")
        assert found == report["attribution"]
        parts = found["parts"]
        summed = parts["market"] + sum(parts["styles"].values())
        assert summed + parts["selection"] + parts["trading"] == pytest.approx(
            found["total"], abs=1e-12
        )
        assert found["total"] == pytest.approx(report["cumulative_return"], abs=1e-12)
        skipped = found["skipped"]
        assert skipped["size"] == skipped["value"] == NO_FUNDAMENTALS
        assert skipped["amount_variability"] == NO_AMOUNT
        # The 52-week high needs bars reaching back a year: not the US ones, the crypto ones do.
        reaches = skipped.get("high_52w", "").startswith("no bars reach back 52 weeks")
        assert reaches is (market == "us")


def test_trace_equals_the_cli_trace_json(demo: Demo) -> None:
    cycle = demo.traced_cycle
    found = _get(demo, f"/api/v1/cycles/{cycle}")
    assert found == _cli_json(demo, "trace", str(cycle), "--json")
    assert [entry["role"] for entry in found["entries"]] == ["user", "reasoning", "tool"]
    assert found["entries"][1]["content"] == HOSTILE
    assert found["usage"]["cost"] == "0.0012345"
    assert found["orders"], "the traced cycle placed orders"
    with demo.engine.connect() as connection:
        untraced = connection.execute(
            select(col(CycleRow.id)).where(col(CycleRow.id) != cycle).limit(1)
        ).scalar_one()
    assert _get(demo, f"/api/v1/cycles/{untraced}") == _cli_json(
        demo, "trace", str(untraced), "--json"
    )


def _walk(demo: Demo, url: str, key: str) -> list[Any]:
    """Every item of a paged endpoint, following `next`; each page's size checked."""
    seen: list[Any] = []
    limit = int(url.rsplit("limit=", 1)[1])
    pages = 0
    next_url: str | None = url
    while next_url is not None:
        page = _get(demo, next_url)
        assert len(page["items"]) <= limit
        assert page["next"] is None or len(page["items"]) == limit
        seen.extend(item[key] for item in page["items"])
        next_url = page["next"]
        pages += 1
    assert pages > 2, "the walk must cross several pages"
    return seen


@pytest.mark.parametrize("agent", ["random", "equal-weight"])
def test_pagination_walks_every_order_fill_and_cycle_exactly_once(demo: Demo, agent: str) -> None:
    account_id = _account_id(demo.engine, agent, "us")
    base = f"/api/v1/agents/{agent}/us"
    with demo.engine.connect() as connection:
        orders = connection.execute(
            select(col(OrderRow.id)).where(col(OrderRow.account_id) == account_id)
        ).scalars()
        expected_orders = sorted(orders, reverse=True)
        expected_fills = sorted(
            connection.execute(
                select(col(FillRow.id)).where(col(FillRow.account_id) == account_id)
            ).scalars(),
            reverse=True,
        )
        slots = connection.execute(
            select(col(CycleRow.slot_at)).where(col(CycleRow.account_id) == account_id)
        ).scalars()
        expected_slots = sorted((slot.isoformat() for slot in slots), reverse=True)
    assert _walk(demo, f"{base}/orders?limit=7", "order_id") == expected_orders
    assert _walk(demo, f"{base}/fills?limit=5", "fill_id") == expected_fills
    assert _walk(demo, f"{base}/cycles?limit=9", "slot_at") == expected_slots


def test_orders_carry_their_cycle_reason_status_and_fills(demo: Demo) -> None:
    page = _get(demo, "/api/v1/agents/random/us/orders?limit=1000")
    cycles = {cycle["cycle_id"]: cycle for cycle in _cycles(demo, "random")}
    for order in page["items"]:
        assert order["reason"] == "random"
        assert order["status"] in {"filled", "rejected"}
        assert (order["status"] == "filled") == bool(order["fills"])
        cycle = cycles[order["cycle_id"]]
        assert cycle["orders"] >= 1
    placed = sum(cycle["orders"] for cycle in cycles.values())
    filled = sum(cycle["fills"] for cycle in cycles.values())
    assert placed == len(page["items"])
    assert filled == sum(len(order["fills"]) for order in page["items"])


def _cycles(demo: Demo, agent: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = _get(demo, f"/api/v1/agents/{agent}/us/cycles?limit=1000")[
        "items"
    ]
    return items


def test_decimals_are_strings_exactly_equal_to_the_ledger(demo: Demo) -> None:
    account_id = _account_id(demo.engine, "random", "us")
    with demo.engine.connect() as connection:
        fills = {
            row.id: row
            for row in connection.execute(
                select(FillRow).where(col(FillRow.account_id) == account_id)
            )
        }
        navs = {
            row.at: row.nav
            for row in connection.execute(
                select(NavSnapshotRow).where(
                    col(NavSnapshotRow.account_id) == account_id,
                    col(NavSnapshotRow.kind) == "slot",
                )
            )
        }
    api_fills = _get(demo, "/api/v1/agents/random/us/fills?limit=1000")["items"]
    assert len(api_fills) == len(fills) > 0
    for fill in api_fills:
        row = fills[fill["fill_id"]]
        for name in ("quantity", "price", "notional", "fees"):
            assert isinstance(fill[name], str)
            assert Decimal(fill[name]) == getattr(row, name)
        assert datetime.fromisoformat(fill["filled_at"]) == row.filled_at
    slot = _get(demo, "/api/v1/agents/random/us/nav")["slot"]
    assert len(slot) == len(navs) > 0
    for point in slot:
        assert isinstance(point["nav"], str)
        assert Decimal(point["nav"]) == navs[datetime.fromisoformat(point["at"])]


def test_the_benchmark_series_is_the_reports(demo: Demo) -> None:
    found = _get(demo, "/api/v1/agents/random/us/benchmark")
    nav = _get(demo, "/api/v1/agents/random/us/nav")
    assert found["benchmark"] == "QQQ"
    assert [p["at"] for p in found["points"]] == [p["at"] for p in nav["slot"]]
    assert Decimal(found["points"][0]["nav"]) == Decimal(nav["account"]["initial_cash"])
    metrics = _get(demo, "/api/v1/agents/random/us/metrics")
    first, last = Decimal(found["points"][0]["nav"]), Decimal(found["points"][-1]["nav"])
    bench = next(r for r in _get(demo, "/api/v1/leaderboard/us")["rows"] if r["is_benchmark"])
    assert float(last / first - 1) == pytest.approx(bench["cumulative_return"], rel=1e-9)
    assert metrics["benchmark"] == found["benchmark"]


@pytest.mark.parametrize(
    ("url", "word"),
    [
        ("/api/v1/leaderboard/mars", "mars"),
        ("/api/v1/leaderboard/mars?window=7d", "mars"),
        ("/api/v1/agents/nobody/us", "nobody"),
        ("/api/v1/agents/nobody/us/nav", "nobody"),
        ("/api/v1/agents/nobody/us/metrics", "nobody"),
        ("/api/v1/agents/nobody/us/positions", "nobody"),
        ("/api/v1/agents/nobody/us/orders", "nobody"),
        ("/api/v1/agents/random/cn/fills", "cn"),
        ("/api/v1/agents/random/mars/cycles", "mars"),
        ("/api/v1/cycles/999999", "999999"),
        ("/api/v1/no-such-thing", "Not Found"),
    ],
)
def test_unknown_names_are_a_404_error_document(demo: Demo, url: str, word: str) -> None:
    response = demo.client.get(url)
    assert response.status_code == 404
    body = ErrorDocument.model_validate(response.json())
    assert body.error.code == "not_found"
    assert word in body.error.message


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/v1/agents/random/us/orders?limit=0", "limit"),
        ("/api/v1/agents/random/us/orders?limit=1001", "limit"),
        ("/api/v1/agents/random/us/orders?limit=ten", "limit"),
        ("/api/v1/agents/random/us/fills?before=abc", "before"),
        ("/api/v1/agents/random/us/fills?before=0", "before"),
        ("/api/v1/agents/random/us/orders?before=99999999999999999999", "before"),
        ("/api/v1/agents/random/us/cycles?before=2025-10-03T10:00:00", "before"),
        ("/api/v1/agents/random/us/cycles?before=yesterday", "before"),
        ("/api/v1/leaderboard/us?window=week", "window"),
        ("/api/v1/leaderboard/us?window=0d", "window"),
        ("/api/v1/leaderboard/us?window=7d&start=2025-10-01", "either window or start/end"),
        ("/api/v1/leaderboard/us?start=2025-10-05&end=2025-10-01", "end is before start"),
        ("/api/v1/leaderboard/us?start=2025-13-01", "start"),
        ("/api/v1/agents/random/us/nav?window=x", "window"),
        ("/api/v1/cycles/abc", "cycle_id"),
        ("/api/v1/cycles/0", "cycle_id"),
    ],
)
def test_bad_query_parameters_are_a_400_error_document(demo: Demo, url: str, field: str) -> None:
    response = demo.client.get(url)
    assert response.status_code == 400, response.text
    body = ErrorDocument.model_validate(response.json())
    assert body.error.code == "bad_request"
    assert field in body.error.message
    assert "\n" not in body.error.message


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("url", ["/api/v1/markets", "/api/v1/agents/random/us/orders"])
def test_only_get_and_head_are_served(demo: Demo, method: str, url: str) -> None:
    response = demo.client.request(method, url, json={"cash": "1e9"})
    assert response.status_code == 405
    assert ErrorDocument.model_validate(response.json()).error.code == "method_not_allowed"
    assert response.headers["allow"] == "GET, HEAD"
    head = demo.client.head(url)
    assert head.status_code == 200
    assert head.content == b""


_EXAMPLES: dict[str, str] = {
    "/api/v1/": "/api/v1/",
    "/api/v1/markets": "/api/v1/markets",
    "/api/v1/leaderboard/{market}": "/api/v1/leaderboard/crypto",
    "/api/v1/agents/{agent}/{market}": "/api/v1/agents/random/us",
    "/api/v1/agents/{agent}/{market}/nav": "/api/v1/agents/random/us/nav",
    "/api/v1/agents/{agent}/{market}/benchmark": "/api/v1/agents/random/us/benchmark",
    "/api/v1/agents/{agent}/{market}/metrics": "/api/v1/agents/random/us/metrics",
    "/api/v1/agents/{agent}/{market}/attribution": "/api/v1/agents/random/crypto/attribution",
    # A baseline has no strategies (the document with some: tests/acceptance/test_fides_cli.py).
    "/api/v1/agents/{agent}/{market}/concordance": "/api/v1/agents/random/us/concordance",
    "/api/v1/agents/{agent}/{market}/positions": "/api/v1/agents/random/us/positions",
    "/api/v1/agents/{agent}/{market}/orders": "/api/v1/agents/random/us/orders?limit=3",
    "/api/v1/agents/{agent}/{market}/fills": "/api/v1/agents/random/crypto/fills?limit=3",
    "/api/v1/agents/{agent}/{market}/cycles": "/api/v1/agents/random/us/cycles?limit=3",
    "/api/v1/leaderboard/{market}/significance": "/api/v1/leaderboard/us/significance",
    "/api/v1/cycles/{cycle_id}": "/api/v1/cycles/{traced}",
    "/api/v1/seasons": "/api/v1/seasons",
    "/api/v1/seasons/{name}": "/api/v1/seasons/later",
}


def test_every_response_matches_its_openapi_model(demo: Demo) -> None:
    document = _get(demo, "/api/v1/openapi.json")
    assert document == json.loads(json.dumps(openapi_document()))
    assert set(document["paths"]) == set(_EXAMPLES) == set(RESPONSE_MODELS)
    served = {
        f"/api/v1{route.path}"
        for route in api_app(demo.engine).routes
        if getattr(route, "path", "") != "/openapi.json"
    }
    assert served == set(_EXAMPLES)
    for path, url in _EXAMPLES.items():
        body = _get(demo, url.format(traced=demo.traced_cycle))
        RESPONSE_MODELS[path].model_validate(body)  # extra="forbid": no undocumented field
        schema = document["paths"][path]["get"]["responses"]["200"]["content"]
        name = schema["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        assert set(document["components"]["schemas"][name]["properties"]) == set(body)


def test_the_index_lists_every_route_and_each_answers(demo: Demo) -> None:
    """Issue 28 (10): `/api/v1/` (and `/api/v1`, redirected to it) names every route served."""
    index = _get(demo, "/api/v1/")
    served = {f"/api/v1{getattr(route, 'path', '')}" for route in api_app(demo.engine).routes}
    listed = [route["path"] for route in index["routes"]]
    assert len(listed) == len(set(listed))
    assert {*listed, index["openapi"]} == served
    assert all(route["summary"] for route in index["routes"])
    assert _get(demo, "/api/v1") == index
    for path in listed:  # each template, filled in, answers
        assert demo.client.get(_EXAMPLES[path].format(traced=demo.traced_cycle)).status_code == 200


def test_the_api_is_the_same_on_postgres(pg_url: str, tmp_path: Path) -> None:
    """The crypto market replayed into Postgres: the leaderboard is the report's and the
    pages walk every order once."""
    spec = next(spec for spec in MARKETS if spec.market == "crypto")
    config = demo_config(tmp_path / "unused.db", [spec])
    config = config.model_copy(update={"store": config.store.model_copy(update={"url": pg_url})})
    upgrade(pg_url)
    replay_from_config(
        config, start=START, end=END, market="crypto", resume=False, show_progress=False
    )
    engine = make_engine(pg_url)
    try:
        from openbell.ops.reports.contamination import cutoff_marks, headline_board
        from openbell.ops.reports.exporting import leaderboard_record
        from openbell.ops.reports.market_reports import market_view
        from openbell.ops.seasons.opening import season_record
        from openbell.store.seasons import season_named

        _open_later_season(engine, tmp_path / "unused.db")
        season = season_record(season_named(engine, "later"))
        view = market_view(engine, "crypto")
        with TestClient(Starlette(routes=api_routes(engine))) as client:
            board = client.get("/api/v1/leaderboard/crypto").json()
            headline = headline_board(view, cutoff_marks(view))
            record = {**leaderboard_record(headline), "season": season}
            assert board == json.loads(json.dumps(record))
            assert client.get("/api/v1/seasons/later").json()["season"] == season
            ids: list[int] = []
            url: str | None = "/api/v1/agents/random/crypto/orders?limit=2"
            while url is not None:
                page = client.get(url).json()
                ids.extend(order["order_id"] for order in page["items"])
                url = page["next"]
            with engine.connect() as connection:
                expected = (
                    connection.execute(
                        select(col(OrderRow.id))
                        .join(AccountRow, col(AccountRow.id) == OrderRow.account_id)
                        .join(AgentRow, col(AgentRow.id) == AccountRow.agent_id)
                        .where(col(AgentRow.name) == "random")
                        .order_by(col(OrderRow.id).desc())
                    )
                    .scalars()
                    .all()
                )
            assert ids == list(expected)
            assert len(ids) > 2
            assert client.get("/api/v1/cycles/999999").status_code == 404
    finally:
        engine.dispose()


def test_equity_curves_are_the_slot_navs_each_row_is_measured_on(demo: Demo) -> None:
    memo = ViewMemo(demo.engine)
    curves = read_model.equity_curves(demo.engine, "us", memo=memo)
    board = read_model.leaderboard(demo.engine, "us", memo=memo)
    agents = {row.agent for row in board.rows if row.agent is not None}
    assert set(curves) == agents
    for agent, curve in curves.items():
        series = read_model.nav_series(demo.engine, agent, "us")
        assert curve == tuple(NavPoint(at=row.at, nav=row.nav) for row in series.slot)
        row = next(r for r in board.rows if r.agent == agent)
        assert row.panel.periods == len(curve) - 1
    with pytest.raises(ReportError):
        read_model.equity_curves(demo.engine, "cn")


def _lifespans(
    lifespans: Sequence[Lifespan],
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """A Starlette lifespan that enters the web parts' lifespans (the views' worker's)."""

    @asynccontextmanager
    async def run(_app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for lifespan in lifespans:
                await stack.enter_async_context(lifespan())
            yield

    return run


def test_the_served_attribution_follows_the_configs_attribution_section(
    demo: Demo, tmp_path: Path
) -> None:
    config = tmp_path / "openbell.toml"
    config.write_text(
        '[markets.crypto]\nuniverse = "crypto10"\ncadence = "daily"\nsource = "ccxt:binance"\n'
        'initial_cash = "10000"\n\n[attribution]\nstyles = "ktd-fin"\n',
        encoding="utf-8",
    )
    report = openbell(
        tmp_path,
        "report",
        "random",
        "-m",
        "crypto",
        "--attribution",
        "--json",
        "--config",
        str(config),
        "--db",
        str(demo.db),
    )
    assert report.returncode == 0, report.stderr
    expected = json.loads(report.stdout)["attribution"]
    assert expected["styles"] == list(STYLE_SETS["ktd-fin"])
    # What `openbell serve` and the daemon mount: the views' worker process computes it.
    choice = attribution_choice(load_config(config), START)
    parts = web_parts(demo.engine, attribution=choice)
    app = Starlette(routes=parts.routes, lifespan=_lifespans(parts.lifespans))
    with TestClient(app) as client:
        served = client.get("/api/v1/agents/random/crypto/attribution")
    assert served.status_code == 200, served.text
    assert served.json() == expected
    # Without the section: every style (`openbell`'s set), as before.
    assert _get(demo, "/api/v1/agents/random/crypto/attribution")["styles"] == list(
        STYLE_SETS["openbell"]
    )
