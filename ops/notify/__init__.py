"""Notifications: the live daemon's events sent through apprise (`[notify]`).

`notices.py` turns the daemon's events into notices; `sender.py` sends them from a worker thread
with a rate limit. `from_config` builds the sink `openbell run` gives the daemon, or None when
`[notify]` names no URL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta

from sqlalchemy import Engine

from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import NotifyConfig
from openbell.ops.notify.notices import Notifications
from openbell.ops.notify.sender import apprise_sender


def notify_urls(config: NotifyConfig, environ: Mapping[str, str] = os.environ) -> list[str]:
    """The URLs of `[notify]`: `urls`, then those of the `urls_env` variables (each may hold
    several, separated by spaces or commas). Raises `ConfigError` for a variable not set."""
    urls = list(config.urls)
    for name in config.urls_env:
        value = environ.get(name, "").strip()
        if not value:
            raise ConfigError(f"[notify] urls_env names {name}, which is not set")
        urls += [url for url in value.replace(",", " ").split() if url]
    return urls


def from_config(
    config: NotifyConfig, engine: Engine, environ: Mapping[str, str] = os.environ
) -> Notifications | None:
    """The notifications of `config` over the ledger `engine`; None without a URL."""
    urls = notify_urls(config, environ)
    if not urls:
        return None
    return Notifications(
        apprise_sender(urls, config.timeout_s),
        engine=engine,
        events=config.events,
        drawdown_pct=config.drawdown_pct,
        digest_at=config.digest_at,
        min_interval=timedelta(seconds=config.min_interval_s),
        max_per_hour=config.max_per_hour,
    )
