"""The web pages served for real and looked at in a real browser, for the browser tests.

`serve(app)` runs an ASGI app on a real uvicorn server bound to 127.0.0.1 on a free port (port
0), in a thread, and yields its base URL; `launch_chromium` starts Debian's Chromium
(`/usr/bin/chromium`, installed by `make install`) through Playwright, headless, with the
browser's own network chatter turned off. Playwright's bundled browsers are never used (their
download is blocked here): without the system Chromium the browser tests skip. `serve_ledger`
serves the pages over a SQLite ledger; `Seen` records what a tab's pages did that they should not
(dialogs, uncaught errors, Content-Security-Policy violations).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import uvicorn
from playwright.sync_api import Browser, ConsoleMessage, Dialog, Error, Page, Playwright
from starlette.applications import Starlette
from starlette.types import ASGIApp

from openbell.ops.web.pages import page_routes
from openbell.store.db import make_engine

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
START_WITHIN_S = 20.0
#: Takes a screenshot of a tab as NAME.png (the browser tests' `shoot` fixture); its path.
Shoot = Callable[[Page, str], Path]


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None when Chromium is installed."""
    if CHROMIUM.exists():
        return None
    return f"{CHROMIUM} is not installed (make install installs it as root with apt-get)"


def skip_without_chromium() -> None:
    """Skip the calling test when Chromium is missing; fail it instead with
    `OPENBELL_REQUIRE_BROWSER=1` (CI sets it: there a skip would hide the browser tests)."""
    missing = chromium_missing()
    if missing is None:
        return
    if os.environ.get("OPENBELL_REQUIRE_BROWSER") == "1":
        pytest.fail(f"OPENBELL_REQUIRE_BROWSER=1 but {missing}")
    pytest.skip(missing)


def launch_chromium(playwright: Playwright) -> Browser:
    """Debian's Chromium, headless, driven by `playwright`."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS), headless=True
    )


@contextmanager
def serve(app: ASGIApp) -> Iterator[str]:
    """`app` on a real uvicorn at 127.0.0.1 on a free port, in a thread; yields the base URL."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        lifespan="off",
        ws="none",
        # uvicorn's own logging config (`dictConfig`) would stop its loggers propagating to the
        # root for the rest of the session; the daemon's server passes None too.
        log_config=None,
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_WITHIN_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=START_WITHIN_S)


def serve_ledger(db: Path, *, poll_interval_s: float) -> AbstractContextManager[str]:
    """The pages over the SQLite ledger `db` on a real uvicorn; the base URL."""
    engine = make_engine(f"sqlite:///{db}")
    return serve(Starlette(routes=page_routes(engine, poll_interval_s=poll_interval_s)))


@dataclass
class Seen:
    """What the pages of one tab did that they should not: dialogs, errors, CSP violations."""

    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    csp_violations: list[str] = field(default_factory=list)

    def console(self, message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            self.csp_violations.append(message.text)

    def dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def error(self, error: Error) -> None:
        self.errors.append(str(error))

    def assert_nothing(self) -> None:
        assert self.dialogs == []
        assert self.errors == []
        assert self.csp_violations == []
