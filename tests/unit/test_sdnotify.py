"""sd_notify: datagrams over a real socket, and nothing without systemd."""

from __future__ import annotations

import socket
from pathlib import Path

from openbell.daemon.sdnotify import Notifier


def test_sd_notify_sends_datagrams_to_the_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(path)
        server.settimeout(2)
        notifier = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "20000000"})
        assert notifier.enabled
        assert notifier.watchdog_s == 20.0
        assert notifier.ready("ringing us")
        assert server.recv(4096) == b"READY=1\nSTATUS=ringing us"
        assert notifier.watchdog()
        assert server.recv(4096) == b"WATCHDOG=1"
        assert notifier.stopping()
        assert server.recv(4096).startswith(b"STOPPING=1")


def test_sd_notify_without_systemd_does_nothing() -> None:
    notifier = Notifier({})
    assert not notifier.enabled
    assert notifier.watchdog_s is None
    assert not notifier.ready()


def test_sd_notify_ignores_a_watchdog_meant_for_another_pid(tmp_path: Path) -> None:
    notifier = Notifier({"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"})
    assert notifier.watchdog_s is None
