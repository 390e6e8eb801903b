"""Logging for openbell: structlog events rendered as one JSON object per line (or console lines).

This module owns the processor chain every log line goes through, ours and third-party stdlib
lines alike (SQLAlchemy, Alembic, httpx): bound contextvars first, then `level`, `logger` and an ISO
UTC `timestamp`, exceptions as structured dicts *without* frame locals, and a redaction pass that
blanks secret-named keys (`api_key`, `authorization`, `token`, `password`, ...) and masks, anywhere
in the event including exception messages, every configured secret in every form (the process's
redactor, `ops.config.secrets.current()`) and secret-looking values (bearer tokens, `sk-...` keys,
URL passwords). Callers log stable snake_case event names: `log.info("daemon_started", ...)`.
Which lines are written (third-party ones at warning unless asked for, `warnings.warn` as
`python_warning`) and their journald priority prefix are `log_routing`'s.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal, TextIO

import structlog
from structlog.processors import ExceptionRenderer
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor, WrappedLogger

from openbell.ops.config import secrets
from openbell.ops.logs import routing as log_routing
from openbell.store.redact import REDACTED

_LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
_SECRET_WORDS = frozenset(
    {"apikey", "authorization", "token", "secret", "password", "passwd", "cookie", "credentials"}
)
_SECRET_KEY = re.compile(r"(?:^|_)(?:api|access|secret|private)_?key$")
_HANDLER_MARK = "_openbell_handler"
_HEAD_KEYS = ("timestamp", "level", "event")


def is_secret_key(key: str) -> bool:
    """Whether a field named `key` holds a secret (`api_key`, `Authorization`, `db_password`, ...).

    Counts such as `max_tokens` or `prompt_tokens` are not secrets; `api_key_env` names a variable.
    """
    normalised = key.lower().replace("-", "_")
    return bool(_SECRET_WORDS & set(normalised.split("_"))) or bool(_SECRET_KEY.search(normalised))


def redact_text(text: str) -> str:
    """`text` with the configured secrets, bearer tokens, `sk-...` keys and URL passwords masked."""
    return secrets.current().mask(text)


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {
            k: REDACTED if isinstance(k, str) and is_secret_key(k) else _redact_value(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact_value(item) for item in value]
    return value


def redact_secrets(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: blank secret-named keys and mask secret-looking values, recursively."""
    for key, value in event_dict.items():
        if is_secret_key(key):
            event_dict[key] = REDACTED
        elif not key.startswith("_"):
            event_dict[key] = _redact_value(value)
    return event_dict


def _head_keys_first(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Put `timestamp`, `level` and `event` first so a line reads left to right."""
    head = {key: event_dict.pop(key) for key in _HEAD_KEYS if key in event_dict}
    return {**head, **event_dict}


def _json_default(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal | set | frozenset):
        return str(value) if isinstance(value, Decimal) else sorted(map(str, value))
    return repr(value)


def configure_logging(
    fmt: Literal["json", "console"] = "json",
    level: str = "info",
    stream: TextIO | None = None,
    *,
    third_party_level: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Send every log line, structlog's and stdlib's, to `stream` (default: stdout) as `fmt`.

    openbell's lines pass at `level`; third-party libraries' at `third_party_level` (None: warning,
    with yfinance's lines left to its adapter), which `$OPENBELL_LOG_THIRD_PARTY` overrides. When
    `stream` is the journal (`environ`'s `JOURNAL_STREAM`), lines carry their syslog priority.
    Safe to call again (the CLI reconfigures once the config file is read); loggers are not cached,
    so a later call or a test's `structlog.testing.capture_logs()` takes effect everywhere.
    """
    if level not in _LEVELS:
        raise ValueError(f"log level should be one of {', '.join(_LEVELS)}, not {level!r}")
    if third_party_level is not None and third_party_level not in _LEVELS:
        known = ", ".join(_LEVELS)
        raise ValueError(
            f"third-party log level should be one of {known}, not {third_party_level!r}"
        )
    env = os.environ if environ is None else environ
    third_party, asked = log_routing.third_party_level(third_party_level, env, _LEVELS)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
    ]
    foreign: list[Processor] = [
        *shared,
        log_routing.add_extra,
        log_routing.name_third_party_event,
    ]
    final: list[Processor]
    if fmt == "json":
        final = [
            ExceptionRenderer(ExceptionDictTransformer(show_locals=False)),
            redact_secrets,
            _head_keys_first,
            structlog.processors.JSONRenderer(default=_json_default, ensure_ascii=False),
        ]
    elif fmt == "console":
        out = stream if stream is not None else sys.stdout
        final = [
            structlog.processors.format_exc_info,
            redact_secrets,
            structlog.dev.ConsoleRenderer(
                colors=out.isatty(), exception_formatter=structlog.dev.plain_traceback
            ),
        ]
    else:
        raise ValueError(f"log format should be 'json' or 'console', not {fmt!r}")

    out = stream if stream is not None else sys.stdout
    handler = logging.StreamHandler(out)
    formatter: logging.Formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=foreign,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *final],
    )
    if log_routing.is_journal(out, env):
        formatter = log_routing.SyslogPrefixed(formatter)
    handler.setFormatter(formatter)
    handler.addFilter(
        log_routing.OriginFilter(ours=_LEVELS[level], third_party=third_party, adapters_shown=asked)
    )
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    log_routing.set_levels(_LEVELS[level], third_party)
    log_routing.capture_warnings()

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
