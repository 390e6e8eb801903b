"""The web benchmark's ledger: 50 agents over a year of crypto and six weeks of US hours, replayed.

Built through the real engine (the replay driver, cycle runner, paper broker and a SQLite ledger),
from the bundled bar files only, so the figures can be reproduced anywhere:

- **crypto, daily, 2024-12-01 .. 2025-11-30**: the one bundled market with a whole year of bars
  (365 slots). The US bundle has 2025-10-01 .. 2025-11-10 hourly and 2025-06-10 .. 2025-10-30
  daily, the A-share one 2025-01-02 .. 2025-11-19 daily: none holds a year.
- **us, hourly, 2025-10-01 .. 2025-10-14**: the first ten sessions of the bundled US hours (60
  slots), so the US leaderboard and an intraday equity curve are served too (all 174 slots would
  add about four minutes to a build of about 20 on the shared 2-core machine: 2-3 s a slot).

The 50 agents, each in both markets: the four deterministic baselines, 40 seeded `random` traders
(seeds 1..40) and 6 LLM agents whose model is faked at the HTTP boundary (`httpx.MockTransport`,
no latency): each cycle they read the portfolio, quote and bars, write a line of reasoning, place
an order with a reason (a target weight, buying or selling by the slot) and finish, so the ledger
has traces, token usage and cost as an LLM arena does. Baselines write no trace.

The ledger is cached under the temp dir, keyed by a hash of its windows, agents and building code
and of the bundled data (bars, universes, actions): a re-run with the same inputs reuses it. The
A-share market (`CN`) is not in it: `web_bench.py` replays it into a copy to time cycles while
pages are served.

Run by hand to build (or find) it: `.venv/bin/python benchmarks/web_ledger.py [--rebuild]`.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

import openbell.markets
from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.recorder import Prices
from openbell.daemon.replay import ReplayReport, run_replay
from openbell.ops.config.schema import (
    BaselineAgentConfig,
    LogConfig,
    MarketConfig,
    MarketsConfig,
    OpenbellConfig,
    RandomAgentConfig,
    StoreConfig,
)
from openbell.ops.logs.rendering import configure_logging
from openbell.ops.wiring.planning import replay_plan
from openbell.store.migrate import upgrade

BASELINE_KINDS = ("buy_and_hold", "equal_weight", "sma_crossover", "cash")
RANDOM_TRADERS = 40
LLM_AGENTS = 6
PRICES = Prices(in_per_mtok=Decimal("0.27"), out_per_mtok=Decimal("1.10"))


@dataclass(frozen=True, slots=True)
class Window:
    """One market's replay: cadence, universe, cash, inclusive UTC dates, and a symbol to trade."""

    market: str
    cadence: str
    universe: str
    initial_cash: str
    start: date
    end: date
    symbol: str


CRYPTO = Window(
    "crypto", "daily", "crypto10", "10000", date(2024, 12, 1), date(2025, 11, 30), "BTC/USDT"
)
US = Window("us", "hourly", "nasdaq100", "10000", date(2025, 10, 1), date(2025, 10, 14), "AAPL")
#: Replayed by web_bench.py into a copy of the ledger while the server runs (not in the ledger).
CN = Window("cn", "daily", "sse50", "100000", date(2025, 1, 3), date(2025, 11, 19), "600519.SH")
LEDGER_WINDOWS = (CRYPTO, US)


def config(db: Path, windows: tuple[Window, ...]) -> OpenbellConfig:
    """The config of the 44 baseline and random agents in `windows`' markets, ledger at `db`."""
    markets = tuple(window.market for window in windows)
    agents: list[BaselineAgentConfig | RandomAgentConfig] = [
        BaselineAgentConfig(name=kind.replace("_", "-"), kind=kind, markets=markets)
        for kind in BASELINE_KINDS
    ]
    agents += [
        RandomAgentConfig(name=f"random-{seed:02d}", kind="random", markets=markets, seed=seed)
        for seed in range(1, RANDOM_TRADERS + 1)
    ]
    return OpenbellConfig(
        store=StoreConfig(url=f"sqlite:///{db.resolve().as_posix()}"),
        log=LogConfig(format="console", level="warning"),
        markets=MarketsConfig(
            **{
                window.market: MarketConfig(
                    universe=window.universe,
                    cadence=window.cadence,
                    source="bundled",
                    initial_cash=window.initial_cash,
                    allow_outside_coverage=True,
                )
                for window in windows
            }
        ),
        agents=tuple(agents),
    )


def _tool_call(step: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_{step}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _fake_model(symbol: str) -> httpx.AsyncClient:
    """An OpenAI-compatible endpoint at the HTTP boundary that plays a five-step script."""

    async def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        step = sum(1 for message in body["messages"] if message["role"] == "assistant")
        # Buy or sell by the prompt (it holds the slot's date), so positions come and go.
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        digest = hashlib.sha256(str(prompt).encode())
        side = "buy" if digest.digest()[0] % 2 == 0 else "sell"
        script: list[tuple[str, str, dict[str, Any]]] = [
            ("Checking the book first.", "get_portfolio", {}),
            (f"Quote {symbol} against the market.", "get_quote", {"symbols": [symbol]}),
            ("Recent bars for the trend.", "get_bars", {"symbol": symbol, "lookback": 20}),
            (
                f"The trend says {side}: moving {symbol} toward its target weight.",
                "place_order",
                {
                    "symbol": symbol,
                    "side": side,
                    "target_weight": "0.2" if side == "buy" else "0",
                    "reason": f"bench script: {side} on the slot's coin toss",
                },
            ),
            ("Done for this slot.", "finish", {"summary": f"{side} {symbol}"}),
        ]
        content, name, arguments = script[min(step, len(script) - 1)]
        completion = {
            "id": f"chatcmpl-bench-{step}",
            "object": "chat.completion",
            "created": 1_760_000_000,
            "model": "fake-bench",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": content,
                        "tool_calls": [_tool_call(step, name, arguments)],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240},
        }
        return httpx.Response(200, json=completion)

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


def llm_agents(symbol: str) -> tuple[LlmAgent, ...]:
    """The 6 scripted LLM agents of a market (one fake endpoint each)."""
    return tuple(
        LlmAgent(
            name=f"llm-{index}",
            client=ChatClient(
                ClientConfig(base_url="http://fake.invalid/v1", model="fake-bench"),
                http=_fake_model(symbol),
            ),
            prices=PRICES,
        )
        for index in range(1, LLM_AGENTS + 1)
    )


def replay_window(db: Path, window: Window, windows: tuple[Window, ...]) -> ReplayReport:
    """Replay `window` with all 50 agents into the ledger at `db` (accounts of `windows`)."""
    plan, _warnings = replay_plan(
        config(db, windows),
        start=window.start,
        end=window.end,
        market=window.market,
        resume=False,
        allow_outside_coverage=True,
    )
    (market,) = plan.markets
    market = replace(market, agents=market.agents + llm_agents(window.symbol))
    return run_replay(replace(plan, markets=(market,)))


def inputs_key() -> str:
    """A hash of what the ledger is built from: the windows, the agents, the code here that builds
    it and the bundled data. Not the migrations: `web_bench.py` upgrades a copy to the head."""
    built_by = (config, _fake_model, llm_agents, replay_window)
    digest = hashlib.sha256(
        repr((LEDGER_WINDOWS, BASELINE_KINDS, RANDOM_TRADERS, LLM_AGENTS)).encode()
    )
    for function in built_by:
        digest.update(inspect.getsource(function).encode())
    data = Path(openbell.markets.__path__[0]) / "data"
    for path in sorted(data.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(data).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cached_ledger(*, rebuild: bool = False, quiet: bool = False) -> Path:
    """The ledger's path in the cache, built first when missing (or when `rebuild`)."""
    folder = Path(tempfile.gettempdir()) / "openbell-web-bench" / inputs_key()
    db = folder / "ledger.db"
    if db.exists() and not rebuild:
        return db
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    building = folder / "building.db"
    upgrade(f"sqlite:///{building.as_posix()}")
    for window in LEDGER_WINDOWS:
        started = time.perf_counter()
        report = replay_window(building, window, LEDGER_WINDOWS)
        if not quiet:
            print(
                f"built {window.market} {window.cadence} {window.start}..{window.end}: "
                f"{report.summary()} in {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
            )
    building.rename(db)  # only a finished ledger is ever found in the cache
    Path(f"{building}.lock").unlink(missing_ok=True)  # the replay's lock file
    return db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true", help="build even when cached")
    args = parser.parse_args()
    configure_logging(level="warning", stream=sys.stderr)
    print(cached_ledger(rebuild=args.rebuild))


if __name__ == "__main__":
    main()
