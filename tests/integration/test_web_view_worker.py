"""The web's view worker: market views computed in a spawned process, exactly as in this one.

Over the demo's crypto market replayed for a week (SQLite and Postgres): the worker's views and
the reports built on them equal the in-process ones (and `openbell leaderboard`'s records), so do
the accounts' factor attributions, a
`ReportError` comes back as it is, a killed worker is replaced, one that keeps dying is one
`ViewWorkerFailed` (a 503 from the API) instead of a hang, and the worker is gone once the server
that served the pages is closed. The worker opens the ledger from `store.db.ledger_address`,
read-only and masking the same secrets.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import signal
import threading
from datetime import date
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError
from starlette.applications import Starlette
from starlette.testclient import TestClient

from openbell.daemon.http import serve_http
from openbell.markets.errors import ReportError
from openbell.ops.reports.exporting import leaderboard_record, report_record
from openbell.ops.reports.market_reports import leaderboard, report
from openbell.ops.web.app import web_parts, web_routes
from openbell.ops.web.memo import ViewMemo
from openbell.ops.web.view_worker import InProcessViews, ViewWorkerFailed, WorkerViews
from openbell.store.db import ledger_address, make_engine
from openbell.store.migrate import upgrade
from openbell.store.redact import Redactor
from openbell_testkit.replay import demo_crypto_replayed

START, END = date(2025, 10, 1), date(2025, 10, 7)


def replayed(db_url: str, tmp_path: Path) -> Engine:
    demo_crypto_replayed(db_url, tmp_path, START, END)
    return make_engine(db_url)


def worker_pids() -> set[int]:
    return {process.pid for process in multiprocessing.active_children() if process.pid}


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_worker_computes_the_views_this_process_computes(db_url: str, tmp_path: Path) -> None:
    engine = replayed(db_url, tmp_path)
    views = WorkerViews(engine)
    try:
        here = InProcessViews(engine).view("crypto", None, None)
        there = views.view("crypto", None, None)
        assert there == here
        assert there.equity_curves() == here.equity_curves()
        assert leaderboard_record(there.leaderboard) == leaderboard_record(
            leaderboard(engine, "crypto")
        )
        memo = ViewMemo(engine, views=views)
        for agent in ("random", "sma-crossover"):
            assert report_record(memo.report(agent, "crypto")) == report_record(
                report(engine, agent, "crypto")
            )
        with pytest.raises(ReportError, match="no accounts in market 'us'"):
            views.view("us", None, None)
        for agent in ("random", "equal-weight"):
            attributed = memo.attribution(agent, "crypto")
            assert attributed == InProcessViews(engine).attribution(agent, "crypto", None, None)
            assert attributed.attribution.periods
        with pytest.raises(ReportError, match="no account"):
            views.attribution("nobody", "crypto", None, None)
    finally:
        views.close()
        engine.dispose()
    with pytest.raises(ViewWorkerFailed, match="shut down"):
        views.view("crypto", None, None)


def test_a_killed_worker_is_replaced_and_one_that_keeps_dying_is_an_error(
    sqlite_url: str, tmp_path: Path
) -> None:
    engine = replayed(sqlite_url, tmp_path)
    views = WorkerViews(engine)
    try:
        first = views.view("crypto", None, None)
        (pid,) = worker_pids()
        os.kill(pid, signal.SIGKILL)
        assert views.view("crypto", None, None) == first  # a new worker, asked again
        (replacement,) = worker_pids()
        assert replacement != pid

        os.kill(replacement, signal.SIGKILL)
        stop = threading.Event()
        killed: set[int] = set()

        def kill_every_worker() -> None:  # each new worker dies while it starts
            while not stop.wait(0.005):
                for started in worker_pids() - killed - {replacement}:
                    os.kill(started, signal.SIGKILL)
                    killed.add(started)

        killer = threading.Thread(target=kill_every_worker)
        killer.start()
        try:
            with pytest.raises(ViewWorkerFailed, match="died twice computing the crypto view"):
                views.view("crypto", None, None)
        finally:
            stop.set()
            killer.join()
        assert len(killed) == 1  # one replacement was tried, and no other
    finally:
        views.close()
        engine.dispose()


def test_a_view_the_worker_cannot_compute_is_a_503(sqlite_url: str, tmp_path: Path) -> None:
    engine = replayed(sqlite_url, tmp_path)
    views = WorkerViews(engine)
    views.close()
    try:
        with TestClient(Starlette(routes=web_routes(engine, views=views))) as client:
            api = client.get("/api/v1/leaderboard/crypto")
            page = client.get("/")
            agent = client.get("/markets/crypto/agents/random")
    finally:
        engine.dispose()
    assert api.status_code == 503
    assert api.json() == {
        "error": {"code": "unavailable", "message": "the view worker is shut down"}
    }
    for answer in (page, agent):
        assert answer.status_code == 503
        assert "the view worker is shut down" in answer.text


def test_the_server_serves_the_worker_s_views_and_closes_the_worker(
    sqlite_url: str, tmp_path: Path
) -> None:
    engine = replayed(sqlite_url, tmp_path)
    paths = ["/api/v1/leaderboard/crypto", "/api/v1/agents/random/crypto/metrics"]

    async def serve() -> tuple[list[httpx.Response], httpx.Response, set[int]]:
        parts = web_parts(engine)
        server = await serve_http("127.0.0.1", 0, routes=parts.routes, lifespans=parts.lifespans)
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                answers = [await client.get(path) for path in paths]
                page = await client.get("/")
            pids = worker_pids()
        finally:
            await server.close()
        return answers, page, pids

    try:
        answers, page, pids = asyncio.run(serve())
        with TestClient(Starlette(routes=web_routes(engine))) as client:
            expected = [client.get(path) for path in paths]
    finally:
        engine.dispose()
    assert page.status_code == 200
    assert "sma-crossover" in page.text
    for answer, here in zip(answers, expected, strict=True):
        assert (answer.status_code, answer.json()) == (200, here.json())
    assert len(pids) == 1
    assert not any(is_running(pid) for pid in pids)
    assert worker_pids() == set()


def test_the_ledger_address_reopens_read_only_masking_the_same_secrets(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    secret = "sk-view-worker-secret-0123456789"  # noqa: S105 (a test secret)
    engine = make_engine(sqlite_url, redactor=Redactor([secret]), statement_timeout_s=5)
    # Pickled as the worker receives it.
    address = pickle.loads(pickle.dumps(ledger_address(engine)))  # noqa: S301 (our own bytes)
    assert secret not in repr(address)
    assert address.statement_timeout_s == 5
    reopened = address.open_read_only()
    try:
        with reopened.connect() as connection:
            echoed = connection.execute(text("SELECT :v"), {"v": f"key {secret}"}).scalar_one()
            assert secret not in echoed
            with pytest.raises(OperationalError, match="readonly"):
                connection.execute(text("CREATE TABLE t (x INTEGER)"))
    finally:
        reopened.dispose()
        engine.dispose()
    with pytest.raises(ValueError, match=r"not made by store\.db\.make_engine"):
        ledger_address(create_engine(sqlite_url))
