"""The cause of a failed read, named from the exceptions the real HTTP stacks raise.

requests (akshare) and curl_cffi (yfinance, akshare's news) fail for real against this machine's
own servers: a name that does not resolve, a port nothing listens on, a server that never answers,
a server that answers 5xx. Nothing leaves the machine: Python sockets may reach loopback only, and
curl resolves names through a DNS-over-HTTPS address on a refused loopback port.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from curl_cffi import CurlOpt
from curl_cffi import requests as curl_requests

from openbell.markets.adapters.failures import curl_cause, failure_cause
from openbell.markets.errors import DataUnavailable
from openbell_testkit.offline import SilentServer, closed_port, loopback_only

VENDOR = "https://query2.finance.yahoo.com/v8/finance/chart/AAPL"


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    loopback_only(monkeypatch)


class _Status(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status = int(self.path.strip("/"))
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def status_server() -> Iterator[str]:
    """A loopback HTTP server answering `GET /503` with status 503."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def raised(call: object) -> BaseException:
    assert callable(call)
    try:
        call()
    except Exception as exc:  # noqa: BLE001  (the test inspects it)
        return exc
    raise AssertionError("the call did not fail")


def unresolvable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Name resolution fails the way a resolver without network does."""

    def fail(*args: object, **kwargs: object) -> None:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", fail)


def test_requests_dns_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    unresolvable(monkeypatch)
    exc = raised(lambda: requests.get(VENDOR, timeout=5))
    assert isinstance(exc, requests.ConnectionError)
    assert failure_cause(exc) == "dns"


def test_requests_connection_refused() -> None:
    exc = raised(lambda: requests.get(f"http://127.0.0.1:{closed_port()}/", timeout=5))
    assert failure_cause(exc) == "connect"


def test_requests_timeout() -> None:
    with SilentServer() as server:
        exc = raised(lambda: requests.get(f"http://127.0.0.1:{server.port}/", timeout=0.3))
    assert isinstance(exc, requests.Timeout)
    assert failure_cause(exc) == "timeout"


def test_requests_error_status(status_server: str) -> None:
    exc = raised(lambda: requests.get(f"{status_server}/503", timeout=5).raise_for_status())
    assert failure_cause(exc) == "http_503"


def test_a_data_unavailable_raised_from_a_vendor_error_keeps_the_vendors_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unresolvable(monkeypatch)

    def read() -> None:
        try:
            requests.get(VENDOR, timeout=5)
        except requests.RequestException as vendor:
            raise DataUnavailable(f"akshare read failed: {vendor!r}") from vendor

    assert failure_cause(raised(read)) == "dns"
    assert failure_cause(DataUnavailable("no rows", cause="empty")) == "empty"
    assert failure_cause(DataUnavailable("unknown")) == "other"


def curl_session(**options: object) -> curl_requests.Session:
    """A curl_cffi session that resolves names over a refused loopback DNS-over-HTTPS address."""
    doh = f"https://127.0.0.1:{closed_port()}/dns-query"
    return curl_requests.Session(curl_options={CurlOpt.DOH_URL: doh}, **options)  # type: ignore[arg-type]


def test_curl_dns_failure() -> None:
    exc = raised(lambda: curl_session().get(VENDOR, timeout=5))
    assert failure_cause(exc) == "dns"


def test_curl_connection_refused() -> None:
    proxy = f"http://127.0.0.1:{closed_port()}"
    exc = raised(lambda: curl_session(proxy=proxy).get(VENDOR, timeout=5))
    assert failure_cause(exc) == "connect"


def test_curl_timeout() -> None:
    with SilentServer() as server:
        exc = raised(lambda: curl_session().get(f"http://127.0.0.1:{server.port}/", timeout=0.3))
    assert failure_cause(exc) == "timeout"


def test_curl_error_status(status_server: str) -> None:
    exc = raised(lambda: curl_session().get(f"{status_server}/502", timeout=5).raise_for_status())
    assert failure_cause(exc) == "http_502"


@pytest.mark.parametrize(
    ("code", "message", "cause"),
    [
        (6, "Could not resolve host: query2.finance.yahoo.com", "dns"),
        (28, "Resolving timed out after 10000 milliseconds", "dns"),
        (28, "Connection timed out after 10002 milliseconds", "timeout"),
        (7, "Failed to connect to query2.finance.yahoo.com port 443", "connect"),
        (23, "Failure writing output to destination", None),
    ],
)
def test_curl_codes(code: int, message: str, cause: str | None) -> None:
    assert curl_cause(code, message) == cause
