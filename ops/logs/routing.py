"""Which log lines are written, under which event, and at which syslog priority.

This module owns the routing `logs.configure_logging` applies. openbell's own records (loggers
under `openbell`, and whatever is logged through structlog) pass at the configured level;
third-party libraries' (APScheduler, urllib3, httpx, SQLAlchemy, Alembic, ccxt, ...) at
`third_party_level`, warning unless asked for, and their free text moves to `message` under the
stable event `third_party_log`. yfinance's lines are the yfinance adapter's raw material (it
reports each failed read as one openbell event), so they are written only when third-party lines
are asked for. `warnings.warn` becomes a `python_warning` event. When the stream is the journal
(systemd's `$JOURNAL_STREAM` names its device and inode), each line starts with its syslog
priority (`<3>` for error), which journald reads as the line's priority, so that
`journalctl -p err` shows the error lines.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from typing import Final, TextIO

import structlog
from structlog.typing import EventDict, WrappedLogger

from openbell.markets.errors import ConfigError

#: Set to a level (debug, info, ...) to ask for third-party lines; it wins over the config's.
THIRD_PARTY_ENV: Final = "OPENBELL_LOG_THIRD_PARTY"
#: The level of third-party lines when nobody asks for more.
THIRD_PARTY_DEFAULT: Final = "warning"
#: The event of every third-party line; its text is in `message`.
THIRD_PARTY_EVENT: Final = "third_party_log"
#: The logger `warnings.warn` goes through, at openbell's level.
WARNINGS_LOGGER: Final = "py.warnings"
#: Loggers whose lines an adapter reads and reports itself: written only when asked for.
ADAPTER_READ: Final = ("yfinance",)

_OURS: Final = ("openbell", WARNINGS_LOGGER)
#: sd-daemon(3) priorities: the highest stdlib level at or below a record's gives its priority.
_PRIORITIES: Final = (
    (logging.CRITICAL, 2),
    (logging.ERROR, 3),
    (logging.WARNING, 4),
    (logging.INFO, 6),
)
_DEBUG_PRIORITY: Final = 7


def is_ours(name: str) -> bool:
    """Whether the logger `name` is openbell's (or the one `warnings.warn` goes through)."""
    return any(name == root or name.startswith(f"{root}.") for root in _OURS)


def _from_structlog(record: logging.LogRecord) -> bool:
    """Whether `record` was logged through structlog, which only openbell uses."""
    return isinstance(record.msg, dict)


def third_party_level(
    configured: str | None, environ: Mapping[str, str], levels: Mapping[str, int]
) -> tuple[int, bool]:
    """The level of third-party lines, and whether someone asked for it (env, then config)."""
    from_env = environ.get(THIRD_PARTY_ENV, "").strip().lower()
    if from_env and from_env not in levels:
        raise ConfigError(
            f"{THIRD_PARTY_ENV} should be one of {', '.join(levels)}, not {from_env!r}"
        )
    asked = from_env or configured
    return levels[asked or THIRD_PARTY_DEFAULT], asked is not None


def set_levels(ours: int, third_party: int) -> None:
    """Let records at either level be made (the root at the lower one); `OriginFilter` sorts.

    The adapter-read loggers are held at `third_party`, but never above warning (their adapter
    reads their warning and error lines), so that asking for openbell's debug lines does not make
    yfinance build its own (it also stops using threads while enabled for debug).
    """
    logging.getLogger().setLevel(min(ours, third_party))
    for name in ADAPTER_READ:
        logging.getLogger(name).setLevel(min(third_party, logging.WARNING))


class OriginFilter(logging.Filter):
    """Passes openbell's records at `ours` and third parties' at `third_party`; drops the
    adapter-read loggers' records unless `adapters_shown` (their adapter reports them)."""

    def __init__(self, *, ours: int, third_party: int, adapters_shown: bool) -> None:
        super().__init__()
        self._ours = ours
        self._third_party = third_party
        self._adapters_shown = adapters_shown

    def filter(self, record: logging.LogRecord) -> bool:
        if _from_structlog(record) or is_ours(record.name):
            return record.levelno >= self._ours
        if not self._adapters_shown and any(
            record.name == name or record.name.startswith(f"{name}.") for name in ADAPTER_READ
        ):
            return False
        return record.levelno >= self._third_party


#: What every `LogRecord` carries (or gains when formatted): anything else came as `extra=`.
_RECORD_ATTRIBUTES: Final = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", (), None))
) | {"message", "asctime"}


def add_extra(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor (stdlib records only): the fields a record got as `extra=`."""
    record = event_dict.get("_record")
    if isinstance(record, logging.LogRecord):
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and not key.startswith("_"):
                event_dict.setdefault(key, value)
    return event_dict


def name_third_party_event(
    _logger: WrappedLogger, _method: str, event_dict: EventDict
) -> EventDict:
    """structlog processor (stdlib records only): a library's text goes to `message`."""
    record = event_dict.get("_record")
    if isinstance(record, logging.LogRecord) and not is_ours(record.name):
        event_dict["message"] = event_dict.get("event")
        event_dict["event"] = THIRD_PARTY_EVENT
    return event_dict


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    if file is not None:  # a caller asked for this warning to go to a given file
        file.write(warnings.formatwarning(message, category, filename, lineno, line))
        return
    structlog.stdlib.get_logger(WARNINGS_LOGGER).warning(
        "python_warning",
        category=category.__name__,
        message=str(message),
        filename=filename,
        lineno=lineno,
    )


def capture_warnings() -> None:
    """Send `warnings.warn` through logging as `python_warning` events (filters still apply)."""
    warnings.showwarning = _show_warning


def priority(levelno: int) -> int:
    """The syslog priority of a stdlib level (error: 3, info: 6)."""
    for level, found in _PRIORITIES:
        if levelno >= level:
            return found
    return _DEBUG_PRIORITY


def is_journal(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """Whether `stream` is the journal: systemd's `$JOURNAL_STREAM` is its `device:inode`."""
    device, _, inode = environ.get("JOURNAL_STREAM", "").partition(":")
    if not device.isdigit() or not inode.isdigit():
        return False
    try:
        found = os.fstat(stream.fileno())
    except (OSError, ValueError):  # io.StringIO and other streams without a descriptor
        return False
    return (found.st_dev, found.st_ino) == (int(device), int(inode))


class SyslogPrefixed(logging.Formatter):
    """`inner`'s lines, each starting with the record's syslog priority (`<3>{...}`)."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self._inner = inner

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{priority(record.levelno)}>"
        return "\n".join(prefix + line for line in self._inner.format(record).split("\n"))
