"""Why a vendor read failed, in one word: the `cause` of a `vendor_read_failed` event.

This module owns the causes and how they are read off an exception. `dns`: the vendor's name did
not resolve; `connect`: no connection (refused, reset, a TLS failure); `timeout`: no answer in
time; `http_<status>`: the vendor answered with an error status (`http_429` is a rate limit);
`empty`: the vendor answered with nothing for a window that has data; `payload`: it answered with
something unreadable (an error page instead of JSON); `other`: none of these. `failure_cause`
walks an exception's chain (`__cause__`, `__context__`, urllib3's `reason`, exceptions passed as
arguments, as requests does) and names the most telling cause in it, so that a DNS failure inside
a connection error inside a vendor's own error is `dns`; a `DataUnavailable` whose adapter named
its cause is taken at its word. curl's error codes (curl_cffi, under yfinance and akshare's news)
map through `curl_cause`. No vendor library is imported here: the chain ends in the standard
library's exceptions (`socket.gaierror`, `ConnectionError`, `TimeoutError`) or in a response.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator, Sequence
from typing import Final

from openbell.markets.errors import DataUnavailable

DNS: Final = "dns"
CONNECT: Final = "connect"
TIMEOUT: Final = "timeout"
EMPTY: Final = "empty"
PAYLOAD: Final = "payload"
OTHER: Final = "other"
RATE_LIMITED: Final = "http_429"

#: CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_RESOLVE_HOST.
_CURL_DNS: Final = frozenset({5, 6})
#: CURLE_COULDNT_CONNECT, SSL_CONNECT_ERROR, GOT_NOTHING, SEND_ERROR, RECV_ERROR.
_CURL_CONNECT: Final = frozenset({7, 35, 52, 55, 56})
_CURL_TIMEOUT: Final = 28
#: When a chain holds several causes, the lowest rank names it (a status is an answer).
_RANK: Final = {DNS: 0, CONNECT: 2, TIMEOUT: 3, PAYLOAD: 4, EMPTY: 5}
_HTTP_RANK: Final = 1
_MAX_LINKS: Final = 64


def http_cause(status: int) -> str:
    """The cause of an answer with HTTP `status` ("http_503")."""
    return f"http_{status}"


def curl_cause(code: int, message: str = "") -> str | None:
    """The cause of curl error `code` (its `message` tells a slow resolver from a slow server)."""
    if code in _CURL_DNS:
        return DNS
    if code == _CURL_TIMEOUT:
        return DNS if "Resolving timed out" in message else TIMEOUT
    if code in _CURL_CONNECT:
        return CONNECT
    return None


def most_common(causes: Sequence[str]) -> str:
    """The cause named most often in `causes` (not empty); the first of a tie."""
    return max(dict.fromkeys(causes), key=causes.count)


def _status(exc: BaseException) -> int | None:
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) and 400 <= status < 600 else None


def _cause_of(exc: BaseException) -> str | None:
    """The cause one exception shows by itself, if any."""
    if isinstance(exc, socket.gaierror):
        return DNS
    status = _status(exc)
    if status is not None:
        return http_cause(status)
    code = getattr(exc, "code", None)
    if type(exc).__module__.startswith("curl_cffi") and isinstance(code, int):
        found = curl_cause(int(code), str(exc))
        if found is not None:
            return found
    if isinstance(exc, TimeoutError):
        return TIMEOUT
    if isinstance(exc, ConnectionError | ssl.SSLError):
        return CONNECT
    if isinstance(exc, json.JSONDecodeError):
        return PAYLOAD
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception it links to, outermost first, each once."""
    seen: set[int] = set()
    queue: list[BaseException] = [exc]
    while queue and len(seen) < _MAX_LINKS:
        found = queue.pop(0)
        if id(found) in seen:
            continue
        seen.add(id(found))
        yield found
        links = (found.__cause__, found.__context__, getattr(found, "reason", None), *found.args)
        queue.extend(link for link in links if isinstance(link, BaseException))


def rank(cause: str) -> int:
    """How telling `cause` is: lower is more (a failed lookup explains a failed connection)."""
    return _HTTP_RANK if cause.startswith("http_") else _RANK.get(cause, len(_RANK) + 1)


def failure_cause(exc: BaseException) -> str:
    """Why the read that raised `exc` failed: "dns", "connect", "timeout", "http_503", ..."""
    found: list[str] = []
    for link in _chain(exc):
        if isinstance(link, DataUnavailable) and link.cause is not None:
            return link.cause
        cause = _cause_of(link)
        if cause is not None:
            found.append(cause)
    return min(found, key=rank) if found else OTHER
