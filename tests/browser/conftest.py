"""Fixtures of the browser tests: the demo's ledger (made once per test run by the real `openbell
demo`, shared by the xdist workers), the pages served over a ledger on a real uvicorn, and
Debian's Chromium via Playwright.

Every test here skips when `/usr/bin/chromium` is missing (`make install` installs it as root),
or fails then with `OPENBELL_REQUIRE_BROWSER=1` (as in CI); nothing else makes them skip. Each
tab records the dialogs its pages open, their uncaught errors and the Content-Security-Policy
violations Chromium reports, so a test can check none happened.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from openbell_testkit.cli import openbell
from openbell_testkit.shared import built_once
from openbell_testkit.web import Seen, Shoot, launch_chromium, serve_ledger, skip_without_chromium

#: The demo's window in these tests: three weeks of every market, a few seconds of replay.
DEMO_START, DEMO_END = "2025-10-01", "2025-10-21"
DEMO_TIMEOUT_S = 300
VIEWPORT = {"width": 1280, "height": 900}
#: Live pages poll this often here (5 s by default).
POLL_S = 0.2


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """Debian's Chromium, once per test module; the test skips when it is not installed.

    Not once per session: Playwright's sync API runs an event loop in this thread while it is
    open, and every later test of the session that calls `asyncio.run` would fail."""
    skip_without_chromium()
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ledger of a real `openbell demo` run, made once per test run (by the first xdist worker
    that needs it; do not write to it)."""
    skip_without_chromium()  # before the demo's half a minute, for nothing

    def demo(cwd: Path) -> None:
        result = openbell(
            cwd,
            "demo",
            "--db",
            str(cwd / "demo.db"),
            "--start",
            DEMO_START,
            "--end",
            DEMO_END,
            "--format",
            "json",
            timeout_s=DEMO_TIMEOUT_S,
        )
        assert result.returncode == 0, result.stderr

    return built_once(tmp_path_factory, "browser-demo", demo) / "demo.db"


@pytest.fixture
def own_db(demo_db: Path, tmp_path: Path) -> Path:
    """A copy of the demo's ledger this test may write to."""
    copy = tmp_path / "ledger.db"
    shutil.copyfile(demo_db, copy)
    return copy


@pytest.fixture(scope="session")
def demo_site(demo_db: Path) -> Iterator[str]:
    """The pages over the demo's ledger, once per session: the base URL."""
    with serve_ledger(demo_db, poll_interval_s=POLL_S) as url:
        yield url


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
def tab(chromium: Browser, seen: Seen) -> Iterator[Page]:
    """A fresh browser tab (its own context, 1280x900) recording into `seen`."""
    context = chromium.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    page = context.new_page()
    page.on("console", seen.console)
    page.on("dialog", seen.dialog)
    page.on("pageerror", seen.error)
    yield page
    context.close()


@pytest.fixture
def shoot(tmp_path: Path) -> Shoot:
    """Take a full-page screenshot of a tab into the test's tmp_path as NAME.png."""

    def take(page: Page, name: str) -> Path:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000, f"{name}.png looks empty"
        return path

    return take
