"""Sending notices off the event loop: a worker thread, a rate limit, apprise.

This module owns `Outbox`. The daemon's sink (`Notifications.take`) puts events on a bounded queue
and returns; one worker thread turns them into notices (`ops.notify.notices`) and sends each through
apprise to the configured URLs, each send bounded by `timeout_s`. A notice is held back when one of
the same key (event and market) went out less than `min_interval_s` clock seconds before, or when
`max_per_hour` went out in the clock hour before it (`notice_suppressed`, counted). A receiver that
is down or never answers costs the worker thread its timeout and nothing else: no slot waits on it,
and a full queue drops the event (`notice_dropped`). `close` waits up to its timeout for what is
queued (the stop's own notice) and then leaves the thread, a daemon thread, behind.
"""

from __future__ import annotations

import queue
import threading
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

import structlog

log = structlog.stdlib.get_logger(__name__)

#: Events waiting for the worker; past this, new ones are dropped.
QUEUE_SIZE: Final = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """One message: `key` rate-limits it (`event:market`), `at` is its clock time."""

    key: str
    at: datetime
    title: str
    body: str
    level: str = "info"  # apprise's notify type: info, success, warning, failure


#: Sends one notice; whether it went out.
Send = Callable[[Notice], bool]


def apprise_sender(urls: Sequence[str], timeout_s: float) -> Send:
    """A `Send` through apprise to `urls`, each request bounded by `timeout_s` (connect and
    read)."""
    with warnings.catch_warnings():
        # apprise's plugins import `imghdr` (deprecated in Python 3.11, gone in 3.13) when
        # their URLs are parsed: that is apprise's to change, not a fault of this run.
        warnings.filterwarnings("ignore", "'imghdr' is deprecated", DeprecationWarning)
        import apprise

        client = apprise.Apprise()
        for url in urls:
            joiner = "&" if "?" in url else "?"
            if not client.add(f"{url}{joiner}cto={timeout_s:g}&rto={timeout_s:g}"):
                log.warning("notify_url_refused", scheme=url.partition(":")[0])
    kinds = {
        "info": apprise.NotifyType.INFO,
        "success": apprise.NotifyType.SUCCESS,
        "warning": apprise.NotifyType.WARNING,
        "failure": apprise.NotifyType.FAILURE,
    }

    def send(notice: Notice) -> bool:
        return bool(
            client.notify(
                title=notice.title,
                body=notice.body,
                notify_type=kinds.get(notice.level, apprise.NotifyType.INFO),
            )
        )

    return send


class RateLimit:
    """At most one notice per key every `min_interval`, and `max_per_hour` in any clock hour."""

    def __init__(self, min_interval: timedelta, max_per_hour: int) -> None:
        self._min_interval = min_interval
        self._max_per_hour = max_per_hour
        self._last: dict[str, datetime] = {}
        self._sent: deque[datetime] = deque()

    def allow(self, notice: Notice) -> bool:
        """Whether `notice` may go out now (and, if so, count it)."""
        last = self._last.get(notice.key)
        if last is not None and notice.at - last < self._min_interval:
            return False
        while self._sent and notice.at - self._sent[0] >= timedelta(hours=1):
            self._sent.popleft()
        if len(self._sent) >= self._max_per_hour:
            return False
        self._last[notice.key] = notice.at
        self._sent.append(notice.at)
        return True


class Outbox:
    """The worker thread that handles queued items with `handle` (module docstring)."""

    def __init__(self, handle: Callable[[object], None], *, size: int = QUEUE_SIZE) -> None:
        self._handle = handle
        self._queue: queue.Queue[object] = queue.Queue(maxsize=size)
        self._thread = threading.Thread(target=self._work, name="openbell-notify", daemon=True)
        self.dropped = 0
        self._thread.start()

    def put(self, item: object) -> None:
        """Queue `item` without waiting (dropped when the queue is full)."""
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1
            log.warning("notice_dropped", queued=self._queue.qsize())

    def close(self, timeout_s: float) -> bool:
        """Let the worker finish what is queued, waiting at most `timeout_s`; whether it did."""
        self.put(_STOP)
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            try:
                self._handle(item)
            except Exception:  # a notice must never stop the worker
                log.exception("notify_failed")


_STOP: Final = object()
