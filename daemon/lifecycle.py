"""The daemon's process lifecycle: start-up checks, the main loop, and an orderly stop.

This is a placeholder loop until the live-daemon issue lands: `run_daemon` checks that the ledger
schema is at this version's head, logs `daemon_started`, then a `daemon_heartbeat` every
`heartbeat_s`, and on SIGINT/SIGTERM (or when the caller sets `stop`) logs `daemon_stopping` and
`daemon_stopped` and returns 0. Signal handlers are installed here, at the top of the daemon, and
nowhere deeper. The daemon takes its own slice of the configuration, `DaemonConfig`, which the CLI
builds from `openbell.toml` (the config models live above this layer, in `openbell.ops`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from dataclasses import dataclass

import structlog

from openbell.daemon.clock import Clock
from openbell.store.db import check_schema, make_engine, parse_url

#: How often the loop looks at the caller's `stop` event, in seconds.
STOP_POLL_S = 0.1
_SIGNALS = (signal.SIGINT, signal.SIGTERM)

log = structlog.stdlib.get_logger(__name__)


@dataclass(frozen=True, kw_only=True)
class DaemonConfig:
    """What the daemon needs from the configuration: the ledger URL and who trades where."""

    store_url: str
    markets: tuple[str, ...]
    agents: tuple[str, ...]


def run_daemon(
    config: DaemonConfig,
    clock: Clock,
    *,
    stop: asyncio.Event | threading.Event,
    heartbeat_s: float = 60.0,
    handle_signals: bool = False,
) -> int:
    """Run until `stop` is set or (with `handle_signals`) SIGINT/SIGTERM arrives; return 0.

    Raises `SchemaError` before starting when the ledger is not at this version's schema head,
    and `ConfigError` for an unusable store URL. `handle_signals` needs the main thread.
    """
    if heartbeat_s <= 0:
        raise ValueError(f"heartbeat_s must be positive, got {heartbeat_s}")
    engine = make_engine(config.store_url)
    try:
        revision = check_schema(engine)
        return asyncio.run(_serve(config, clock, stop, heartbeat_s, handle_signals, revision))
    finally:
        engine.dispose()


async def _serve(
    config: DaemonConfig,
    clock: Clock,
    stop: asyncio.Event | threading.Event,
    heartbeat_s: float,
    handle_signals: bool,
    revision: str,
) -> int:
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    reasons: list[str] = []

    def request_stop(reason: str) -> None:
        if not reasons:
            reasons.append(reason)
        wake.set()

    if handle_signals:
        for sig in _SIGNALS:
            loop.add_signal_handler(sig, request_stop, sig.name)
    try:
        log.info(
            "daemon_started",
            store_url=parse_url(config.store_url).render_as_string(hide_password=True),
            schema_revision=revision,
            markets=list(config.markets),
            agents=list(config.agents),
            heartbeat_s=heartbeat_s,
            now_at=clock.now(),
        )
        started = loop.time()
        next_beat = started + heartbeat_s
        beats = 0
        while not wake.is_set():
            if stop.is_set():
                request_stop("stop_requested")
                break
            timeout_s = min(STOP_POLL_S, max(0.0, next_beat - loop.time()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout_s)
            if not wake.is_set() and loop.time() >= next_beat:
                beats += 1
                log.info(
                    "daemon_heartbeat",
                    beat=beats,
                    now_at=clock.now(),
                    uptime_s=round(loop.time() - started, 3),
                )
                next_beat = loop.time() + heartbeat_s
        log.info("daemon_stopping", reason=reasons[0])
        # Nothing to drain yet: the cycle runner arrives with the live-daemon issue.
        log.info("daemon_stopped", reason=reasons[0], heartbeats=beats)
        return 0
    finally:
        if handle_signals:
            for sig in _SIGNALS:
                loop.remove_signal_handler(sig)
