"""A fake Yahoo for the yfinance tests: recorded chart payloads behind a `requests` transport.

yfinance runs for real (URL building, JSON parsing, frame assembly); only its HTTP layer is
replaced by `FakeYahoo`, which answers from routes over the recorded payloads in
`tests/resources/vendors/yahoo` (see the README there).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import requests
from requests.adapters import BaseAdapter
from requests.models import PreparedRequest, Response

from openbell.markets.adapters.yfinance import YahooSource

#: The recorded payloads in the repository (the installed kit links back to its source file).
PAYLOADS = Path(__file__).resolve().parents[2] / "resources" / "vendors" / "yahoo"
Route = Callable[[PreparedRequest], tuple[int, Any]]


def payload(name: str) -> Any:
    return json.loads((PAYLOADS / name).read_text(encoding="utf-8"))


class FakeYahoo(BaseAdapter):
    """A `requests` transport answering from routes (regex on the URL -> status and body)."""

    def __init__(self, routes: list[tuple[str, Route]]) -> None:
        super().__init__()
        self.routes: list[tuple[str, Route]] = [
            (r"fc\.yahoo\.com", lambda r: (200, "")),
            (r"getcrumb", lambda r: (200, "fakecrumb")),
            *routes,
        ]
        self.urls: list[str] = []

    def send(self, request: PreparedRequest, *args: Any, **kwargs: Any) -> Response:
        url = request.url or ""
        self.urls.append(url)
        status, body = 404, "Not Found"
        for pattern, route in self.routes:
            if re.search(pattern, url):
                status, body = route(request)
                break
        response = Response()
        response.status_code = status
        response.url = url
        response.request = request
        response._content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        response.headers["Content-Type"] = "application/json"
        return response

    def close(self) -> None:
        pass


def charts(by_ticker: dict[str, tuple[int, Any]]) -> tuple[str, Route]:
    def route(request: PreparedRequest) -> tuple[int, Any]:
        ticker = re.search(r"/chart/([^?]+)", request.url or "")
        assert ticker is not None
        return by_ticker.get(ticker.group(1), (200, payload("chart_not_found.json")))

    return r"/v8/finance/chart/", route


def source(
    routes: list[tuple[str, Route]], now: datetime, **options: Any
) -> tuple[YahooSource, FakeYahoo]:
    adapter = FakeYahoo(routes)
    session = requests.Session()
    session.mount("https://", adapter)
    found = YahooSource(now=lambda: now, session=session, threads=False, **options)
    return found, adapter
