"""The systemd notification protocol (`sd_notify`), spoken over `$NOTIFY_SOCKET` without a library.

This module owns `Notifier`: one datagram of `KEY=VALUE` lines per message to the unix socket that
systemd names in `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace), and the watchdog
interval systemd asks for in `$WATCHDOG_USEC` (honoured only when `$WATCHDOG_PID` is unset or this
process). Without `$NOTIFY_SOCKET` (not under systemd, or `Type=simple`) every call does nothing.
A failed send is logged once and never stops the daemon.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

import structlog

log = structlog.stdlib.get_logger(__name__)


class Notifier:
    """Sends `READY=1`, `WATCHDOG=1`, `STOPPING=1`, `EXTEND_TIMEOUT_USEC=...` and `STATUS=...` to
    systemd, if it listens."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET", "")
        if address.startswith("@"):
            address = "\0" + address[1:]
        self._address = address or None
        self._warned = False
        self._watchdog_s: float | None = None
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self._watchdog_s = int(usec) / 1_000_000

    @property
    def enabled(self) -> bool:
        """Whether systemd gave a notification socket."""
        return self._address is not None

    @property
    def watchdog_s(self) -> float | None:
        """The watchdog timeout systemd set (WatchdogSec=), or None when there is none."""
        return self._watchdog_s

    def send(self, **fields: str) -> bool:
        """Send one message (`READY="1"` becomes `READY=1`); True if it was sent."""
        if self._address is None:
            return False
        message = "\n".join(f"{key}={value}" for key, value in fields.items()).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.connect(self._address)
                sock.sendall(message)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("sd_notify_failed", error_message=str(exc))
            return False
        return True

    def ready(self, status: str = "ringing") -> bool:
        """Start-up is complete."""
        return self.send(READY="1", STATUS=status)

    def extend_timeout(self, seconds: float) -> bool:
        """Start-up (or stopping) needs up to `seconds` more, from now: systemd moves its
        `TimeoutStartSec=` deadline (`EXTEND_TIMEOUT_USEC`) instead of killing the daemon."""
        return self.send(EXTEND_TIMEOUT_USEC=str(round(seconds * 1_000_000)))

    def watchdog(self) -> bool:
        """The main loop is making progress."""
        return self.send(WATCHDOG="1")

    def stopping(self, status: str = "stopping") -> bool:
        """An orderly stop has begun."""
        return self.send(STOPPING="1", STATUS=status)
