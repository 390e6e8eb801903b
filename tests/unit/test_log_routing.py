"""Which lines are written: openbell's at its level, third parties' at warning unless asked for,
yfinance's left to the adapter, `warnings.warn` as JSON, and journald priorities under systemd."""

from __future__ import annotations

import io
import json
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest
import structlog

from openbell.markets.errors import ConfigError
from openbell.ops.logs.rendering import configure_logging
from openbell_testkit.logs import logging_restored

APSCHEDULER_LINE = (
    "Adding job tentatively -- it will be properly scheduled when the scheduler starts"
)


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    with logging_restored():
        yield


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def speak_everywhere() -> None:
    """One line at each level from openbell, from two libraries, and from yfinance."""
    ours = structlog.stdlib.get_logger("openbell.daemon.live")
    ours.debug("ours_debug")
    ours.info("ours_info")
    ours.error("ours_error")
    logging.getLogger("apscheduler.scheduler").info(APSCHEDULER_LINE)
    logging.getLogger("urllib3.connectionpool").debug("Starting new HTTPS connection (1): x:443")
    logging.getLogger("sqlalchemy.pool").warning("pool %s exhausted", "main")
    logging.getLogger("yfinance").error("['AAPL']: DNSError('Could not resolve host')")


def test_third_party_lines_below_warning_are_left_out_by_default() -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream, environ={})
    speak_everywhere()
    found = [(line["logger"], line["level"]) for line in lines(stream.getvalue())]
    assert found == [
        ("openbell.daemon.live", "info"),
        ("openbell.daemon.live", "error"),
        ("sqlalchemy.pool", "warning"),
    ]  # no APScheduler or urllib3 chatter; yfinance's lines are the adapter's to report


def test_a_third_party_line_has_a_stable_event_and_its_text_in_message() -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream, environ={})
    logging.getLogger("sqlalchemy.pool").warning("pool %s exhausted", "main")
    (line,) = lines(stream.getvalue())
    assert line["event"] == "third_party_log"
    assert line["message"] == "pool main exhausted"
    assert (line["logger"], line["level"]) == ("sqlalchemy.pool", "warning")


def test_openbells_own_stdlib_events_keep_their_name_and_fields() -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream, environ={})
    logging.getLogger("openbell.markets.adapters.yfinance.source").warning(
        "vendor_symbol_missing", extra={"source": "yfinance", "symbols": ["GONE"]}
    )
    (line,) = lines(stream.getvalue())
    assert (line["event"], line["source"], line["symbols"]) == (
        "vendor_symbol_missing",
        "yfinance",
        ["GONE"],
    )
    assert "message" not in line


@pytest.mark.parametrize(
    ("config_level", "environ"),
    [
        ("info", {}),
        (None, {"OPENBELL_LOG_THIRD_PARTY": "info"}),
        ("error", {"OPENBELL_LOG_THIRD_PARTY": "info"}),  # the environment wins
    ],
)
def test_third_party_lines_come_when_asked_for(
    config_level: str | None, environ: dict[str, str]
) -> None:
    stream = io.StringIO()
    configure_logging("json", "warning", stream, third_party_level=config_level, environ=environ)
    speak_everywhere()
    found = [
        (line["logger"], line["event"], line.get("message")) for line in lines(stream.getvalue())
    ]
    assert found == [
        ("openbell.daemon.live", "ours_error", None),  # openbell itself stays at warning
        ("apscheduler.scheduler", "third_party_log", APSCHEDULER_LINE),
        ("sqlalchemy.pool", "third_party_log", "pool main exhausted"),
        ("yfinance", "third_party_log", "['AAPL']: DNSError('Could not resolve host')"),
    ]


def test_asking_for_debug_lines_of_ours_does_not_turn_on_every_librarys_debug() -> None:
    configure_logging("json", "debug", io.StringIO(), environ={})
    assert structlog.stdlib.get_logger("openbell.x").is_enabled_for(logging.DEBUG)
    # yfinance stops using threads while its logger is enabled for debug.
    assert not logging.getLogger("yfinance").isEnabledFor(logging.DEBUG)


def test_yfinance_keeps_making_the_lines_its_adapter_reads() -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream, third_party_level="critical", environ={})
    assert logging.getLogger("yfinance").isEnabledFor(logging.WARNING)
    logging.getLogger("yfinance").error("['AAPL']: possibly delisted; no timezone found")
    assert stream.getvalue() == ""  # made for the adapter, not written


def test_a_bad_third_party_level_from_the_environment_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="OPENBELL_LOG_THIRD_PARTY"):
        configure_logging(
            "json", "info", io.StringIO(), environ={"OPENBELL_LOG_THIRD_PARTY": "loud"}
        )


class LibraryWarning(UserWarning):
    """A warning a library might raise."""


def test_python_warnings_are_json_lines_with_category_and_message() -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream, environ={})
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn_explicit(
            "the inplace keyword is deprecated", LibraryWarning, "somelib/frame.py", 220
        )
    (line,) = lines(stream.getvalue())
    assert line["event"] == "python_warning"
    assert line["level"] == "warning"
    assert line["category"] == "LibraryWarning"
    assert line["message"] == "the inplace keyword is deprecated"
    assert (line["filename"], line["lineno"]) == ("somelib/frame.py", 220)


def journal_of(stream: TextIO) -> dict[str, str]:
    """The environment systemd gives a unit whose output is `stream`."""
    found = os.fstat(stream.fileno())
    return {"JOURNAL_STREAM": f"{found.st_dev}:{found.st_ino}"}


def test_under_journald_each_line_starts_with_its_syslog_priority(tmp_path: Path) -> None:
    with (tmp_path / "journal").open("w+", encoding="utf-8") as stream:
        configure_logging("json", "debug", stream, environ=journal_of(stream))
        log = structlog.stdlib.get_logger("openbell.daemon.live")
        log.debug("detail")
        log.info("daemon_started")
        log.warning("bell_missed")
        log.error("calendar_horizon")
        log.critical("ledger_breach")
        logging.getLogger("sqlalchemy.pool").error("pool exhausted")
        stream.seek(0)
        written = stream.read().splitlines()
    priorities = [line[: line.index(">") + 1] for line in written]
    assert priorities == ["<7>", "<6>", "<4>", "<3>", "<2>", "<3>"]
    events = [
        json.loads(line[len(prefix) :])["event"]
        for line, prefix in zip(written, priorities, strict=True)
    ]
    assert events == [
        "detail",
        "daemon_started",
        "bell_missed",
        "calendar_horizon",
        "ledger_breach",
        "third_party_log",
    ]


def test_without_journald_lines_are_pure_json(tmp_path: Path) -> None:
    with (
        (tmp_path / "out").open("w+", encoding="utf-8") as stream,
        (tmp_path / "other").open("w", encoding="utf-8") as other,
    ):
        # JOURNAL_STREAM names another file (say stderr went to the journal, stdout elsewhere).
        for environ in ({}, journal_of(other)):
            configure_logging("json", "info", stream, environ=environ)
            structlog.stdlib.get_logger("openbell.x").error("calendar_horizon")
        stream.seek(0)
        written = stream.read().splitlines()
    assert len(written) == 2
    assert all(json.loads(line)["event"] == "calendar_horizon" for line in written)
