"""`openbell run` with `[notify]` for real, in a subprocess on a fake clock: a local webhook
receives the daemon's start and, after SIGTERM, its stop; the stop logs no error line."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from openbell_testkit.cli import CRYPTO_1H, free_port
from openbell_testkit.cli import Daemon as CliDaemon

Daemon = partial(CliDaemon, stop_within_s=30)

CONFIG = f"""
[store]
url = "sqlite:///var/openbell.db"

[http]
listen = "127.0.0.1:{{port}}"

[notify]
urls = ["json://127.0.0.1:{{hook}}/openbell"]
digest_at = ""

[markets.crypto]
universe = "crypto10"
cadence = "hourly"
source = "replay:{CRYPTO_1H}"
initial_cash = "10000"

[[agents]]
name = "equal-weight"
kind = "equal_weight"
markets = ["crypto"]
"""


@contextmanager
def receiver() -> Iterator[tuple[int, list[dict[str, Any]]]]:
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
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], received
    finally:
        server.shutdown()
        server.server_close()


def test_the_webhook_hears_the_start_and_the_stop(tmp_path: Path) -> None:
    with receiver() as (hook, received):
        text = CONFIG.replace("{port}", str(free_port())).replace("{hook}", str(hook))
        (tmp_path / "openbell.toml").write_text(text, encoding="utf-8")
        args = ("--fake-clock", "2025-11-03T00:59:00Z:60", "--stop-grace-s", "0")
        with Daemon(tmp_path, *args) as daemon:
            daemon.wait_for("slot_finished")
            code, _elapsed_s, stderr = daemon.stop(signal.SIGTERM)
        titles = [body["title"] for body in received]
    assert code == 0, stderr
    assert titles[0] == "openbell started"
    assert titles[-1] == "openbell stopped"
    errors = [r for r in daemon.records(json_only=True) if r.get("level") in ("error", "critical")]
    assert errors == []
