"""What yfinance met during a call: its warning and error lines, and each failed HTTP request.

This module owns `YahooWatch`. yfinance never raises from `download` and swallows most request
errors (a DNS failure of a chart request leaves only "possibly delisted" behind), so the watch
reads two things into a call's `DownloadFailures`: the `yfinance` logger's lines (rate limits,
symbols Yahoo does not know) and, on the HTTP session yfinance is given, each request that raised
(its cause read off the real exception chain by `adapters.failures`) or was answered with an error
status (a 404 is Yahoo not knowing a symbol, or its cookie page: not a failure).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, cast

from curl_cffi import requests as curl_requests

from openbell.markets.adapters.failures import failure_cause, http_cause
from openbell.markets.adapters.yfinance.parse import DownloadFailures

_NOT_FOUND: Final = 404
#: curl's messages end in a pointer to its error list; an error message does without it.
_CURL_SEE: Final = ". See https://curl.se/"


def describe(exc: BaseException) -> str:
    """`exc` in one short line: its class and message (curl's pointer to its error list cut)."""
    return f"{type(exc).__name__}: {str(exc).split(_CURL_SEE)[0]}"


class _LogCollector(logging.Handler):
    def __init__(self, failures: DownloadFailures) -> None:
        super().__init__(level=logging.WARNING)
        self._failures = failures

    def emit(self, record: logging.LogRecord) -> None:
        self._failures.read(record.getMessage())


class YahooWatch:
    """The session yfinance uses (`session`, or a new Chrome-impersonating curl_cffi one), watched.

    The session's `request` is wrapped in place: yfinance accepts only `requests` and `curl_cffi`
    sessions, and both send every `get` and `post` through `request`.
    """

    def __init__(self, session: Any = None) -> None:
        self.session: Any = (
            session if session is not None else curl_requests.Session(impersonate="chrome")
        )
        self._current: DownloadFailures | None = None
        request = self.session.request

        def watched(*args: Any, **kwargs: Any) -> Any:
            url = str(kwargs.get("url", args[1] if len(args) > 1 else ""))
            try:
                response = request(*args, **kwargs)
            except Exception as exc:
                self._note(url, failure_cause(exc), describe(exc))
                raise
            status = getattr(response, "status_code", None)
            if isinstance(status, int) and status >= 400 and status != _NOT_FOUND:
                self._note(url, http_cause(status), f"HTTP {status} from {url.split('?')[0]}")
            return response

        cast(Any, self.session).request = watched

    def _note(self, url: str, cause: str, detail: str) -> None:
        current = self._current
        if current is not None:
            current.note(url, cause, detail)

    @contextmanager
    def during(self, failures: DownloadFailures) -> Iterator[DownloadFailures]:
        """Read what yfinance meets into `failures` while the block runs (one call at a time).

        yfinance's logger is held at warning or above by the logging setup, so its lines are made.
        """
        handler = _LogCollector(failures)
        vendor_logger = logging.getLogger("yfinance")
        vendor_logger.addHandler(handler)
        self._current = failures
        try:
            yield failures
        finally:
            if self._current is failures:  # a later call may have begun after this one timed out
                self._current = None
            vendor_logger.removeHandler(handler)
