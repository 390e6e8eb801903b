"""What yfinance 1.7 met, read from its own log lines (recorded from real offline runs) and from
the requests that failed: which tickers failed and why, which Yahoo does not know."""

from __future__ import annotations

import pytest

from openbell.markets.adapters.yfinance.parse import DownloadFailures, yahoo_cause

CURL_SEE = " See https://curl.se/libcurl/c/libcurl-errors.html first for more details."
# yf.download(["AAPL", "MSFT", "NVDA"]) with every name failing to resolve, as logged.
DNS_RUN = (
    "Cookie/crumb fetch failed (DNSError), continuing without crumb",
    "Failed to get ticker 'AAPL' reason: Failed to perform, curl: (6) Could not resolve host: "
    "query2.finance.yahoo.com." + CURL_SEE,
    "Failed to get ticker 'MSFT' reason: Failed to perform, curl: (6) Could not resolve host: "
    "query2.finance.yahoo.com." + CURL_SEE,
    "$MSFT: possibly delisted; no timezone found",
    "\n3 Failed downloads:",
    "['AAPL', 'NVDA']: DNSError('Failed to perform, curl: (6) Could not resolve host: "
    "query2.finance.yahoo.com." + CURL_SEE + "')",
    "['MSFT']: possibly delisted; no timezone found",
)


def read(lines: tuple[str, ...] | list[str]) -> DownloadFailures:
    failures = DownloadFailures()
    for line in lines:
        failures.read(line)
    return failures


def test_a_ticker_that_could_not_be_resolved_failed_and_is_not_missing() -> None:
    failures = read(DNS_RUN)
    assert failures.failed == {"AAPL": "dns", "MSFT": "dns", "NVDA": "dns"}
    assert failures.missing == set()  # MSFT's "possibly delisted" came after its DNS failure
    assert failures.cause == "dns"
    assert failures.first("dns").startswith("Cookie/crumb fetch failed (DNSError)")


def test_a_ticker_yahoo_does_not_know_is_missing() -> None:
    failures = read(["\n1 Failed download:", "['GONE']: possibly delisted; no timezone found"])
    assert (failures.missing, failures.failed, failures.cause) == ({"GONE"}, {}, None)


def test_a_rate_limit_marks_its_tickers() -> None:
    limited = "YFRateLimitError('Too Many Requests. Rate limited. Try after a while.')"
    failures = read([f"['MSFT', 'AAPL']: {limited}"])
    assert failures.rate_limited == {"MSFT", "AAPL"}
    assert failures.cause == "http_429"


@pytest.mark.parametrize(
    ("line", "cause"),
    [
        (
            (
                "['AAPL']: HTTPError('500 Server Error: None for url: "
                "https://query2.finance.yahoo.com/v10/finance/quoteSummary/AAPL')"
            ),
            "http_500",
        ),
        ("['AAPL']: HTTPError('HTTP Error 502: Bad Gateway')", "http_502"),
        (
            "['AAPL']: Timeout('Failed to perform, curl: (28) Connection timed out after 30002 "
            "milliseconds." + CURL_SEE + "')",
            "timeout",
        ),
        (
            "['AAPL']: Timeout('Failed to perform, curl: (28) Resolving timed out after 10000 "
            "milliseconds." + CURL_SEE + "')",
            "dns",
        ),
        (
            (
                "['AAPL']: ConnectionError('Failed to perform, curl: (7) Failed to connect to "
                "query2.finance.yahoo.com:443 over proxy 127.0.0.1 after 0 ms')"
            ),
            "connect",
        ),
        ("Cookie fetch from fc.yahoo.com failed (ConnectionError), continuing", "connect"),
        ("AAPL: Failed to retrieve the news and received faulty response instead.", "payload"),
        ("['AAPL']: possibly delisted; no price data found  (1d 2025-07-05 -> 2025-07-10)", None),
    ],
)
def test_the_cause_a_line_names(line: str, cause: str | None) -> None:
    assert yahoo_cause(line) == cause


def test_a_failed_request_names_its_ticker_from_the_url() -> None:
    failures = read(["['^GSPC']: possibly delisted; no price data found"])
    failures.note(
        "https://query2.finance.yahoo.com/v8/finance/chart/%5EGSPC?period1=1", "http_503", "503"
    )
    failures.note("https://fc.yahoo.com", "dns", "DNSError: Could not resolve host: fc.yahoo.com")
    assert failures.failed == {"^GSPC": "http_503"}
    assert failures.missing == set()
    assert failures.seen == ["dns"]
    assert failures.cause == "http_503"  # a ticker's own failure names the read's cause


def test_the_most_telling_cause_of_a_ticker_wins() -> None:
    failures = read(["Failed to get ticker 'AAPL' reason: Expecting value: line 1 column 1"])
    assert failures.failed == {"AAPL": "payload"}
    failures.note("https://query2.finance.yahoo.com/v8/finance/chart/AAPL", "http_500", "HTTP 500")
    assert failures.failed == {"AAPL": "http_500"}  # the status explains the unreadable page
