"""Logging: one JSON object per line, stable event names, no secrets written, stdlib lines too."""

from __future__ import annotations

import io
import json
import logging
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
import structlog

from openbell.ops.logs.rendering import REDACTED, configure_logging, is_secret_key, redact_text
from openbell_testkit.logs import logging_restored

SK_VALUE = "sk-live4f9a7c1e5b2d4f6a8c0e"
BEARER = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.abc123"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    with logging_restored():
        yield


@pytest.fixture
def out(restore_logging: None) -> io.StringIO:
    stream = io.StringIO()
    configure_logging("json", "info", stream)
    return stream


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    text = stream.getvalue()
    assert text.endswith("\n")
    parsed = [json.loads(line) for line in text.splitlines()]
    assert all(isinstance(item, dict) for item in parsed)
    return parsed


def test_one_json_object_per_line_with_event_level_and_utc_timestamp(out: io.StringIO) -> None:
    log = structlog.stdlib.get_logger("openbell.test")
    log.info("cycle_completed", cash=Decimal("10.50"), slot_at=datetime(2025, 1, 2, tzinfo=UTC))
    log.warning("order_rejected", reason="lot_size")

    first, second = lines(out)
    assert (first["event"], first["level"], first["logger"]) == (
        "cycle_completed",
        "info",
        "openbell.test",
    )
    assert first["cash"] == "10.50"
    assert first["slot_at"] == "2025-01-02T00:00:00+00:00"
    stamped = datetime.fromisoformat(first["timestamp"])
    assert stamped.utcoffset() is not None
    assert stamped.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert (second["event"], second["level"]) == ("order_rejected", "warning")


def test_bound_contextvars_are_merged(out: io.StringIO) -> None:
    structlog.contextvars.bind_contextvars(agent="cash", market="us", cycle_id=7)
    structlog.stdlib.get_logger("openbell.test").info("nav_snapshot_written")
    (line,) = lines(out)
    assert (line["agent"], line["market"], line["cycle_id"]) == ("cash", "us", 7)


def test_level_filters(out: io.StringIO) -> None:
    log = structlog.stdlib.get_logger("openbell.test")
    log.debug("too_detailed")
    logging.getLogger("somelib").debug("also too detailed")
    log.info("kept")
    assert [line["event"] for line in lines(out)] == ["kept"]


@pytest.mark.parametrize(
    "key", ["api_key", "Authorization", "token", "access_token", "db_password", "client_secret"]
)
def test_secret_named_keys_are_redacted(out: io.StringIO, key: str) -> None:
    structlog.stdlib.get_logger("t").info("request_sent", **{key: "hunter2", "nested": {key: 1}})
    (line,) = lines(out)
    assert line[key] == REDACTED
    assert line["nested"][key] == REDACTED
    assert "hunter2" not in out.getvalue()


@pytest.mark.parametrize("key", ["max_tokens", "prompt_tokens", "api_key_env", "idempotency_key"])
def test_ordinary_keys_are_kept(key: str) -> None:
    assert not is_secret_key(key)


def test_secret_looking_values_are_masked(out: io.StringIO) -> None:
    structlog.stdlib.get_logger("t").info(
        f"calling with {SK_VALUE}",
        headers=[f"Bearer {BEARER}"],
        url="postgresql+psycopg://openbell:pa55word@db/openbell",
    )
    (line,) = lines(out)
    text = out.getvalue()
    assert SK_VALUE not in text
    assert BEARER not in text
    assert "pa55word" not in text
    assert line["headers"] == [f"Bearer {REDACTED}"]
    assert line["url"] == f"postgresql+psycopg://openbell:{REDACTED}@db/openbell"


def _call_vendor(api_key: str) -> None:
    authorization = f"Bearer {api_key}"
    raise RuntimeError(f"vendor refused {authorization}")


def test_exceptions_are_structured_without_locals_or_secrets(out: io.StringIO) -> None:
    try:
        _call_vendor(SK_VALUE)
    except RuntimeError:
        structlog.stdlib.get_logger("t").exception("llm_call_failed")
    (line,) = lines(out)
    text = out.getvalue()
    assert line["event"] == "llm_call_failed"
    assert SK_VALUE not in text
    assert "Traceback" not in text
    (exc,) = line["exception"]
    assert exc["exc_type"] == "RuntimeError"
    assert exc["exc_value"] == f"vendor refused Bearer {REDACTED}"
    assert exc["frames"]
    assert all("locals" not in frame for frame in exc["frames"])


def test_stdlib_loggers_write_the_same_json(out: io.StringIO) -> None:
    logging.getLogger("sqlalchemy.pool").warning("pool %s exhausted, key %s", "main", SK_VALUE)
    try:
        _call_vendor(SK_VALUE)
    except RuntimeError:
        logging.getLogger("httpx").exception("request failed")
    first, second = lines(out)
    assert first["event"] == "third_party_log"
    assert first["message"] == f"pool main exhausted, key {REDACTED}"
    assert (first["level"], first["logger"]) == ("warning", "sqlalchemy.pool")
    assert "timestamp" in first
    assert second["message"] == "request failed"
    assert second["exception"][0]["exc_type"] == "RuntimeError"
    assert SK_VALUE not in out.getvalue()


def test_reconfiguring_replaces_the_handler(restore_logging: None) -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("json", "info", first)
    configure_logging("json", "info", second)
    structlog.stdlib.get_logger("t").info("once")
    assert first.getvalue() == ""
    assert [line["event"] for line in lines(second)] == ["once"]


def test_console_format_is_for_people_and_still_redacts(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging("console", "debug", stream)
    try:
        _call_vendor(SK_VALUE)
    except RuntimeError:
        structlog.stdlib.get_logger("t").exception("llm_call_failed", api_key=SK_VALUE)
    text = stream.getvalue()
    assert "llm_call_failed" in text
    assert SK_VALUE not in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])


def test_redact_text_leaves_plain_text_alone() -> None:
    assert redact_text("cash 10000 USD at https://example.com/v1") == (
        "cash 10000 USD at https://example.com/v1"
    )


@pytest.mark.parametrize(("fmt", "level"), [("xml", "info"), ("json", "loud")])
def test_bad_format_or_level_is_refused(restore_logging: None, fmt: Any, level: str) -> None:
    with pytest.raises(ValueError, match="log"):
        configure_logging(fmt, level, io.StringIO())


def test_openbell_tokens_are_masked_in_log_lines(out: io.StringIO) -> None:
    agent_token = "obt_" + secrets.token_urlsafe(32)
    cycle_token = "obc_" + secrets.token_urlsafe(32)
    structlog.stdlib.get_logger("t").info(
        f"client connected with {agent_token}",
        mcp_config={"env": {"OPENBELL_MCP_TOKEN": cycle_token}},
        url=f"http://127.0.0.1:8765/mcp?token={cycle_token}",
    )
    logging.getLogger("uvicorn.error").warning("GET /mcp?token=%s 401", agent_token)

    first, second = lines(out)
    text = out.getvalue()
    assert agent_token not in text
    assert cycle_token not in text
    assert first["event"] == f"client connected with {REDACTED}"
    assert first["mcp_config"] == {"env": {"OPENBELL_MCP_TOKEN": REDACTED}}
    assert first["url"] == f"http://127.0.0.1:8765/mcp?token={REDACTED}"
    assert second["message"] == f"GET /mcp?token={REDACTED} 401"
