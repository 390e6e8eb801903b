"""The yfinance adapter when Yahoo cannot be reached: real yfinance over real curl, no network.

curl resolves names over DNS-over-HTTPS at a loopback address: on a refused port it is a resolver
that fails at once, on a silent server one that stops answering. A proxy on a refused loopback
port is a connection that cannot be made. Python sockets are refused outright; curl reaches
nothing beyond this machine.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yfinance as yf
from curl_cffi import CurlOpt
from curl_cffi import requests as curl_requests

from openbell.markets.adapters.failures import failure_cause
from openbell.markets.adapters.yfinance import YahooSource
from openbell.markets.errors import DataUnavailable
from openbell_testkit.offline import SilentServer, closed_port, refuse_network, sync

MID_SESSION = datetime(2025, 7, 9, 19, 0, tzinfo=UTC)
WEEK = (datetime(2025, 7, 6, tzinfo=UTC), datetime(2025, 7, 10, tzinfo=UTC))
UNIVERSE = ("AAPL", "MSFT", "NVDA")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_network(monkeypatch)


@pytest.fixture(autouse=True)
def _isolated_yfinance(tmp_path: Path) -> None:
    yf.set_tz_cache_location(str(tmp_path / "yf-cache"))
    yf.data.YfData.cache_get.cache_clear()


def curl_session(*, doh_port: int | None = None, proxy: str | None = None) -> object:
    """A Chrome-impersonating curl_cffi session (as yfinance's own) resolving over loopback."""
    doh = f"https://127.0.0.1:{doh_port or closed_port()}/dns-query"
    options = {CurlOpt.DOH_URL: doh}
    return curl_requests.Session(impersonate="chrome", curl_options=options, proxy=proxy)


def yahoo(session: object, **options: object) -> YahooSource:
    return YahooSource(now=lambda: MID_SESSION, universe=UNIVERSE, session=session, **options)  # type: ignore[arg-type]


@sync
async def test_an_unresolvable_yahoo_is_a_dns_failure() -> None:
    source = yahoo(curl_session())
    with pytest.raises(DataUnavailable, match="dns") as bars:
        await source.bars(["AAPL"], "1d", *WEEK)
    assert failure_cause(bars.value) == "dns"
    with pytest.raises(DataUnavailable) as quote:
        await source.quote(["AAPL", "MSFT"], MID_SESSION)
    assert failure_cause(quote.value) == "dns"
    with pytest.raises(DataUnavailable) as news:
        await source.news(["AAPL", "MSFT"], *WEEK, limit=5)
    assert failure_cause(news.value) == "dns"


@pytest.fixture
def slow_resolver() -> Iterator[SilentServer]:
    """A resolver that fails at once until yfinance says so, then stops answering."""
    with SilentServer(holding=False) as server:

        class Hold(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                server.hold()

        handler = Hold(level=logging.WARNING)
        vendor = logging.getLogger("yfinance")
        vendor.addHandler(handler)
        try:
            yield server
        finally:
            vendor.removeHandler(handler)


@sync
async def test_a_resolver_that_stops_answering_is_a_dns_failure_not_a_timeout(
    slow_resolver: SilentServer,
) -> None:
    source = yahoo(curl_session(doh_port=slow_resolver.port), timeout_s=5.0)
    try:
        with pytest.raises(DataUnavailable, match="gave up after 5 s") as raised:
            await source.bars(["AAPL"], "1h", *WEEK)
    finally:
        slow_resolver.release()  # what still waits on the resolver fails at once
    assert failure_cause(raised.value) == "dns"
    assert str(raised.value).startswith("yfinance download of 3 tickers failed (dns)")


@sync
async def test_a_connection_that_cannot_be_made_is_a_connect_failure() -> None:
    source = yahoo(curl_session(proxy=f"http://127.0.0.1:{closed_port()}"))
    with pytest.raises(DataUnavailable) as raised:
        await source.bars(["AAPL"], "1d", *WEEK)
    assert failure_cause(raised.value) == "connect"
