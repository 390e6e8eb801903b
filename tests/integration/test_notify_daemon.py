"""Notifications (`[notify]`, `ops.notify`) from a live daemon on a fast fake clock, sent through
apprise's `json://` webhook to a local HTTP receiver: it receives the start, the dark slot, the
daily digest and the stop; a receiver that never answers slows no slot."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from openbell.daemon.clock import ScaledClock
from openbell.ops.config.schema import NotifyConfig
from openbell.ops.notify import from_config
from openbell.ops.notify.notices import Notifications
from openbell.store.db import make_engine
from openbell_testkit.live import (
    DARK_FROM,
    START_AT,
    cycles,
    dark_plan,
    migrated,
    running,
    sleep_until,
)

SPEED = 600.0


@contextmanager
def receiver() -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """A local webhook: the JSON bodies POSTed to it, in order."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], received
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def notifications(url: str, hook: str, **config: Any) -> tuple[Notifications, Any]:
    engine = make_engine(url)
    settings = NotifyConfig(urls=(hook,), digest_at="02:30", drawdown_pct=0.001, **config)
    found = from_config(settings, engine, environ={})
    assert found is not None
    return found, engine


def test_the_receiver_gets_the_start_the_dark_slot_the_digest_and_the_stop(
    sqlite_url: str,
) -> None:
    url = migrated(sqlite_url)
    with receiver() as (port, received):
        notes, engine = notifications(url, f"json://127.0.0.1:{port}/hook", min_interval_s=0)
        clock = ScaledClock(START_AT - timedelta(minutes=1), speed=SPEED)
        with running(replace(dark_plan(url), events=notes.take), clock):
            sleep_until(clock, START_AT + timedelta(hours=2, minutes=50))
        assert notes.close(timeout_s=30)
        engine.dispose()
    titles = [body["title"] for body in received]
    assert titles[0] == "openbell started"
    assert titles[-1] == "openbell stopped"
    dark = [body for body in received if body["title"] == "openbell crypto: slot data_unavailable"]
    assert len(dark) == 1
    assert f"Slot {DARK_FROM.isoformat()}: data_unavailable (dns)" in dark[0]["message"]
    (digest,) = [body for body in received if body["title"].startswith("openbell daily digest")]
    assert "crypto (USDT" in digest["message"]
    assert "buy-and-hold" in digest["message"]
    assert any(title.endswith("in drawdown") for title in titles), titles
    assert all(body["type"] in ("info", "success", "warning", "failure") for body in received)


def test_a_receiver_that_never_answers_slows_no_slot(sqlite_url: str) -> None:
    url = migrated(sqlite_url)
    with silent_port() as port:
        notes, engine = notifications(url, f"json://127.0.0.1:{port}/hook", timeout_s=5)
        clock = ScaledClock(START_AT - timedelta(minutes=1), speed=SPEED)
        with running(replace(dark_plan(url), events=notes.take), clock):
            sleep_until(clock, START_AT + timedelta(hours=3, minutes=50))
            stopping_s = time.monotonic()
        stop_s = time.monotonic() - stopping_s
        closing_s = time.monotonic()
        notes.close(timeout_s=1)
        assert time.monotonic() - closing_s < 2
        engine.dispose()
    rows = cycles(url)
    lit = [START_AT + timedelta(hours=h) for h in (0, 2, 3)]
    for slot_at in lit:  # every slot with data ran in time, each agent's decision done
        assert sorted(r.status for r in rows if r.slot_at == slot_at) == ["done", "done"], slot_at
    assert {r.status for r in rows if r.slot_at == DARK_FROM} == {"skipped"}
    assert stop_s < 5, stop_s  # the stop does not wait on the receiver either
