"""Logging state for the tests that configure logging: put back as it was when a test ends.

`configure_logging` (and the CLI, which calls it) changes process-wide state: the root logger's
handlers and level, the vendor loggers' levels, `warnings.showwarning`, structlog's configuration
and context variables. `logging_restored` undoes all of it when its block ends.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import structlog

#: The third-party loggers whose level `configure_logging` sets.
VENDOR_LOGGERS = ("yfinance",)


@contextmanager
def logging_restored() -> Iterator[None]:
    """Run the block, then put the process's logging back as it was before it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    vendor_levels = {name: logging.getLogger(name).level for name in VENDOR_LOGGERS}
    showwarning = warnings.showwarning
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, was in vendor_levels.items():
            logging.getLogger(name).setLevel(was)
        warnings.showwarning = showwarning
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()
