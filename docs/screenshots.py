"""The docs' screenshots: the arena page and an agent's page, served over the demo's ledger.

Builds the demo's ledger with `openbell demo --db LEDGER` when that file does not exist yet (a few
minutes; pass `--db` to keep it between runs), serves the pages on a real uvicorn (127.0.0.1, a
free port) and photographs them in Debian's Chromium through Playwright, 1280 pixels wide:
`arena.png` (the whole arena page) and `agent.png` (the first 900 pixels of the page of `--agent`
in `--market`: equity curve, drawdown, metrics). Needs the dev install (`make install`: Playwright,
the test kit and Chromium). Not a test: run it by hand,
`.venv/bin/python docs/screenshots.py [--db LEDGER] [--out DIR] [--market M] [--agent NAME]`.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from openbell_testkit.web import chromium_missing, launch_chromium, serve_ledger

VIEWPORT = {"width": 1280, "height": 900}


def build_demo(db: Path) -> None:
    """Run the real `openbell demo` into `db`."""
    script = shutil.which("openbell", path=str(Path(sys.executable).parent)) or "openbell"
    print(f"building the demo's ledger at {db} (a few minutes)", file=sys.stderr)
    subprocess.run(  # noqa: S603  (our own console script, next to this interpreter)
        [script, "demo", "--db", str(db)], check=True, stdout=subprocess.DEVNULL
    )


def take(db: Path, out: Path, market: str, agent: str) -> list[Path]:
    """Photograph the arena and the agent's page over `db` into `out`; the files written."""
    arena, page_of_agent = out / "arena.png", out / "agent.png"
    with serve_ledger(db, poll_interval_s=60) as site, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
        page.goto(site + "/")
        page.screenshot(path=str(arena), full_page=True)
        page.goto(f"{site}/markets/{market}/agents/{agent}")
        page.screenshot(path=str(page_of_agent))
        browser.close()
    return [arena, page_of_agent]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="the demo's ledger (built when missing)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--market", default="us")
    parser.add_argument("--agent", default="equal-weight")
    args = parser.parse_args()
    missing = chromium_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as scratch:
        db: Path = args.db or Path(scratch) / "demo.db"
        if not db.exists():
            build_demo(db)
        for path in take(db, args.out, args.market, args.agent):
            print(f"{path} ({path.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
