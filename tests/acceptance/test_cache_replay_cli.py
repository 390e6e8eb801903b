"""A recorded live session replays from its cache to the same decisions, through the real
adapter and the real CLI (issue 15, item 5, done-when).

The live session is the daemon's own live loop (`run_live`) on a fast fake clock, in this process,
whose crypto market's source is the real ccxt adapter (`CcxtSource` over ccxt's binance class) with
the network faked at the exchange's `fetch`: it answers recorded Binance payloads
(`exchangeInfo.json`, the session's klines `klines_session.json`, and tickers shaped as
`ticker_24hr.json`), serving only the candles opened by the clock's now (the last one still open,
which the adapter drops) and, as last price, the open of the candle in progress a little marked up.
Two deterministic agents trade: the `equal_weight` baseline and
`openbell_testkit.hourly_agent.HourlyRandom` (the seeded `random` baseline, after reading each
symbol's last hourly bars: the snapshot reads daily bars only, and the replay of an hourly market
rings at the cached hourly bars). The daemon records its bars (with when it first had them final),
quotes and fills in its store's cache and ledger. Then `openbell replay --from-cache LIVE_STORE`
runs in a subprocess over the same day into a fresh ledger: its cycles, orders and fills must be the
live ones, and `openbell ledger verify` must pass on both ledgers. The replay rings at the starts of
the recorded final bars, so the last live slot is not replayed: its bar was still open when last
fetched (the daemon stopped before it closed), and a replay rings only at bars it can show. The live
store is SQLite, then Postgres.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import ccxt.async_support as ccxt_async
import pytest

from openbell.agents.baselines import build_agent
from openbell.daemon.clock import ScaledClock
from openbell.daemon.plan import LivePlan, MarketPlan
from openbell.markets.adapters.ccxt import CcxtSource
from openbell.markets.domain import Instrument
from openbell.markets.universes import Universe
from openbell_testkit.cli import openbell
from openbell_testkit.hourly_agent import HourlyRandom
from openbell_testkit.live import migrated, query, running, verifies
from openbell_testkit.offline import refuse_network

PAYLOADS = Path(__file__).parents[1] / "resources" / "vendors" / "binance"
START_AT = datetime(2025, 11, 3, 0, 0, tzinfo=UTC)
SYMBOLS = ("BTC/USDT", "ETH/USDT")
SPEED = 900.0  # one hourly slot every four seconds
#: The daemon starts this long before the first slot (clock time: about a second to start up).
LEAD = timedelta(minutes=20)
#: How long the live session runs, in clock hours: it rings 00:00 .. 04:00.
HOURS = 4.3
#: The exchange's last trade is this much above the open of the candle in progress.
MARKUP = Decimal("1.0003")
HOUR_MS = 3_600_000


def payload(name: str) -> Any:
    return json.loads((PAYLOADS / name).read_text(encoding="utf-8"))


class FakeBinance:
    """Binance's REST answers from recorded payloads, as of the clock's now (see the module
    docstring); ccxt's own parsers and error mapping run on them."""

    def __init__(self, exchange: Any, clock: ScaledClock) -> None:
        self._exchange = exchange
        self._clock = clock
        self._info = payload("exchangeInfo.json")
        self._klines: dict[str, dict[str, list[list[Any]]]] = payload("klines_session.json")
        (self._ticker,) = payload("ticker_24hr.json")

    def _now_ms(self) -> int:
        return int(self._clock.now().timestamp() * 1000)

    def _candles(self, url: str) -> list[list[Any]]:
        query = dict(part.split("=", 1) for part in url.split("?", 1)[1].split("&"))
        since = int(query.get("startTime", "0"))
        limit = int(query.get("limit", "500"))
        now_ms = self._now_ms()
        served = self._klines[query["interval"]][query["symbol"]]
        rows = [row for row in served if since <= row[0] <= now_ms]
        return rows[:limit]

    def _tickers(self) -> list[dict[str, Any]]:
        now_ms = self._now_ms()
        out = []
        for symbol, rows in self._klines["1h"].items():
            current = [row for row in rows if row[0] <= now_ms < row[0] + HOUR_MS]
            if current:
                last = (Decimal(current[0][1]) * MARKUP).quantize(Decimal("0.01"))
                out.append(
                    {
                        **self._ticker,
                        "symbol": symbol,
                        "lastPrice": f"{last:f}",
                        "closeTime": now_ms,
                    }
                )
        return out

    async def fetch(
        self, url: str, method: str = "GET", headers: Any = None, body: Any = None
    ) -> Any:
        if "/api/v3/exchangeInfo" in url:
            parsed: Any = self._info
        elif "/api/v3/klines" in url:
            parsed = self._candles(url)
        elif "/api/v3/ticker/24hr" in url:
            parsed = self._tickers()
        else:
            raise AssertionError(f"no recorded answer for {url}")
        self._exchange.on_rest_response(200, "", url, method, {}, json.dumps(parsed), headers, body)
        return parsed


def live_plan(store_url: str, clock: ScaledClock) -> LivePlan:
    exchange = ccxt_async.binance(
        {
            "enableRateLimit": False,
            "options": {"fetchMarkets": {"types": ["spot"]}, "fetchCurrencies": False},
        }
    )
    exchange.fetch = FakeBinance(exchange, clock).fetch
    universe = Universe(
        name="two-coins",
        market="crypto",
        as_of=START_AT.date(),
        instruments=tuple(
            Instrument(symbol=symbol, market="crypto", currency="USDT") for symbol in SYMBOLS
        ),
    )
    market = MarketPlan(
        market="crypto",
        source=CcxtSource(exchange, now=clock.now),
        universe=universe,
        cadence="hourly",
        initial_cash=Decimal(10000),
        agents=(
            build_agent("equal_weight", "equal-weight", market="crypto"),
            HourlyRandom(name="random", seed=7),
        ),
        grace=timedelta(minutes=30),
    )
    return LivePlan(
        store_url=store_url, markets=(market,), http_listen=None, heartbeat_s=0.5, lease_s=600.0
    )


def run_live_session(store_url: str) -> None:
    clock = ScaledClock(START_AT - LEAD, speed=SPEED)
    with running(live_plan(store_url, clock), clock):
        target = START_AT + timedelta(hours=HOURS)
        while clock.now() < target:
            time.sleep(0.05)


def replay_config(tmp_path: Path, replay_url: str) -> Path:
    config = tmp_path / "replay.toml"
    config.write_text(
        f'[store]\nurl = "{replay_url}"\n\n'
        '[markets.crypto]\nuniverse = ["BTC/USDT", "ETH/USDT"]\ncadence = "hourly"\n'
        'source = "ccxt:binance"\ninitial_cash = "10000"\n\n'
        '[[agents]]\nname = "equal-weight"\nkind = "equal_weight"\nmarkets = ["crypto"]\n\n'
        '[[agents]]\nname = "random"\nkind = "python"\nmarkets = ["crypto"]\n'
        'entry = "openbell_testkit.hourly_agent:HourlyRandom"\noptions = { seed = 7 }\n',
        encoding="utf-8",
    )
    return config


def instant(value: datetime | str) -> datetime:
    at = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def cycles(store_url: str) -> list[tuple[datetime, str, str]]:
    rows = query(
        store_url,
        "SELECT c.slot_at, a.name, c.status FROM cycle c JOIN account ac ON ac.id = c.account_id "
        "JOIN agent a ON a.id = ac.agent_id ORDER BY c.slot_at, a.name",
    )
    return [(instant(row[0]), row[1], row[2]) for row in rows]


def trades(store_url: str) -> list[tuple[Any, ...]]:
    rows = query(
        store_url,
        "SELECT c.slot_at, a.name, o.seq, o.symbol, o.side, o.quantity, o.status, f.price, "
        'f.filled_at FROM "order" o JOIN cycle c ON c.id = o.cycle_id '
        "JOIN account ac ON ac.id = c.account_id JOIN agent a ON a.id = ac.agent_id "
        'LEFT JOIN "fill" f ON f.order_id = o.id ORDER BY c.slot_at, a.name, o.seq',
    )
    return [
        (
            instant(row[0]),
            *row[1:5],
            Decimal(str(row[5])),
            row[6],
            None if row[7] is None else Decimal(str(row[7])),
            None if row[8] is None else instant(row[8]),
        )
        for row in rows
    ]


@pytest.fixture
def live_url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "sqlite":
        refuse_network(monkeypatch)  # Postgres needs its socket; the exchange is faked either way
    return migrated(request.getfixturevalue(f"{request.param}_url"))


@pytest.mark.parametrize(
    "live_url", ["sqlite", pytest.param("pg", marks=pytest.mark.postgres)], indirect=True
)
def test_a_live_session_through_the_ccxt_adapter_replays_from_its_cache_via_the_cli(
    live_url: str, tmp_path: Path
) -> None:
    run_live_session(live_url)
    live_cycles = cycles(live_url)
    slots = sorted({at for at, _, _ in live_cycles})
    assert slots[:5] == [START_AT + timedelta(hours=h) for h in range(5)]
    assert {status for _, _, status in live_cycles} == {"done"}
    assert verifies(live_url)
    [(cached,)] = query(live_url, "SELECT count(*) FROM bar WHERE is_final")
    assert int(cached) > 0

    replay_url = f"sqlite:///{(tmp_path / 'replay.db').as_posix()}"
    config = replay_config(tmp_path, replay_url)
    args = ["--start", "2025-11-03", "--end", "2025-11-03", "--from-cache", live_url]
    replayed = openbell(tmp_path, "replay", "--config", str(config), *args)
    assert replayed.returncode == 0, replayed.stderr
    verified = openbell(tmp_path, "ledger", "verify", "--db", replay_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    verified = openbell(tmp_path, "ledger", "verify", "--db", live_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    # The last live slot's bar was still open when the daemon stopped: not replayed.
    replayable = slots[:-1]
    replay_cycles = cycles(replay_url)
    assert sorted({at for at, _, _ in replay_cycles}) == replayable
    assert replay_cycles == [row for row in live_cycles if row[0] in replayable]
    live_trades = [row for row in trades(live_url) if row[0] in replayable]
    assert sum(row[6] == "filled" for row in live_trades) >= 3
    assert trades(replay_url) == live_trades
    assert f"{2 * len(replayable)} cycles done, 0 failed" in replayed.stdout
