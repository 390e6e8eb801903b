"""The secrets a config names (agents' keys from the environment, the store URL's password, the
HTTP read token), the warning about one too short to mask, and what the process prints: log lines
and every line through `MaskedStream`, in any form of the secret."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from openbell.ops.config import secrets
from openbell.ops.config.schema import OpenbellConfig, load_config
from openbell.ops.logs.rendering import configure_logging
from openbell.store.redact import REDACTED, Redactor
from openbell_testkit.logs import logging_restored
from openbell_testkit.secrets import leaks

KEY = "sk-unit-0123456789abcdefXYZ"
OTHER = "sk-other-9876543210fedcbaQRS"
PASSWORD = "db-pa55word-4242"  # noqa: S105  (a test value)


def config_text(store_url: str = "sqlite:///var/x.db") -> str:
    agent = (
        '[[agents]]\nname = "{name}"\nkind = "llm"\nmarkets = ["us"]\n'
        'base_url = "http://127.0.0.1:1/v1"\nmodel = "m"\napi_key_env = "{env}"\n\n'
    )
    return (
        f'[store]\nurl = "{store_url}"\n\n'
        '[markets.us]\nuniverse = "nasdaq100"\ncadence = "daily"\nsource = "yfinance"\n'
        'initial_cash = "10000"\n\n'
        + agent.format(name="a", env="KEY_A")
        + agent.format(name="b", env="KEY_B")
        + agent.format(name="c", env="KEY_UNSET")
    )


@pytest.fixture(autouse=True)
def restore() -> Iterator[None]:
    with logging_restored():
        yield
    secrets._active.redactor = Redactor()


def load(tmp_path: Path, text: str) -> OpenbellConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)


def test_the_config_names_its_agents_keys_and_the_store_password(tmp_path: Path) -> None:
    config = load(tmp_path, config_text(f"postgresql+psycopg://ob:{PASSWORD}@db/openbell"))
    found = secrets.configured_secrets(config, {"KEY_A": KEY, "KEY_B": OTHER})
    assert [(s.source, s.value) for s in found] == [
        ("env KEY_A", KEY),
        ("env KEY_B", OTHER),
        ("store url password", PASSWORD),
    ]
    assert KEY not in repr(found)
    redactor = secrets.redactor_for(config, {"KEY_A": KEY}, extra=["bearer-token-0123456789"])
    assert redactor.secret_count == 3
    assert redactor.mask_values(f"{KEY} {PASSWORD}") == f"{REDACTED} {REDACTED}"


def test_a_judges_key_is_a_configured_secret(tmp_path: Path) -> None:
    judge = '[judges.j]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\napi_key_env = "KEY_J"\n\n'
    text = config_text()
    config = load(tmp_path, text.replace("[[agents]]", judge + "[[agents]]", 1))
    found = secrets.configured_secrets(config, {"KEY_A": KEY, "KEY_J": OTHER})
    assert [(s.source, s.value) for s in found] == [("env KEY_A", KEY), ("env KEY_J", OTHER)]


def test_a_secret_too_short_to_mask_is_named_in_a_warning_never_shown(tmp_path: Path) -> None:
    config = load(tmp_path, config_text())
    with structlog.testing.capture_logs() as logged:
        redactor = secrets.activate(config, {"KEY_A": "hush7", "KEY_B": KEY})
    assert redactor.secret_count == 1
    assert secrets.current() is redactor
    (warning,) = logged
    assert warning["event"] == "secret_too_short_to_mask"
    assert warning["source"] == "env KEY_A"
    assert "hush7" not in json.dumps(warning)


def test_log_lines_mask_the_configured_secrets_in_every_form(tmp_path: Path) -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream)
    secrets.activate(load(tmp_path, config_text()), {"KEY_A": KEY})
    log = structlog.stdlib.get_logger("t")
    log.info(
        "model_said",
        content=json.dumps({"reason": KEY}).replace("-", "\\u002d"),
        query=KEY.replace("-", "%2D"),
        bare=KEY.removeprefix("sk-"),
    )
    logging.getLogger("somelib").warning("vendor echoed %s", KEY)
    text = stream.getvalue()
    assert len(text.splitlines()) == 2
    assert leaks(text, [KEY]) == []
    assert text.count(REDACTED) == 4


def test_every_line_printed_through_a_masked_stream_is_masked(tmp_path: Path) -> None:
    secrets.activate(load(tmp_path, config_text()), {"KEY_A": KEY})
    target = io.StringIO()
    stream = secrets.MaskedStream(target)
    stream.write("first: " + KEY[:10])
    stream.write(KEY[10:] + "\nsecond ")  # a key written in two pieces is still masked
    assert target.getvalue() == f"first: {REDACTED}\n"
    stream.write(KEY.replace("-", "\\u002d"))
    stream.flush()  # a partial line (a progress bar) is written when flushed
    assert target.getvalue() == f"first: {REDACTED}\nsecond {REDACTED}"
    assert not stream.isatty()
    with pytest.raises(TypeError):
        stream.write(b"bytes")  # type: ignore[arg-type]


def test_a_postgres_password_from_pgpassword_is_a_secret_too(tmp_path: Path) -> None:
    """The docs suggest PGPASSWORD to keep the password out of the file: it is masked like one."""
    postgres = load(tmp_path, config_text("postgresql+psycopg://ob@db/openbell"))
    found = secrets.configured_secrets(postgres, {"PGPASSWORD": PASSWORD})
    assert [(s.source, s.value) for s in found] == [("env PGPASSWORD", PASSWORD)]
    redactor = secrets.redactor_for(postgres, {"PGPASSWORD": PASSWORD})
    assert redactor.mask_values(f"password {PASSWORD}") == f"password {REDACTED}"
    sqlite = load(tmp_path, config_text())
    assert secrets.configured_secrets(sqlite, {"PGPASSWORD": PASSWORD}) == []


def test_the_http_read_token_is_a_configured_secret(tmp_path: Path) -> None:
    token = "read-token-0123456789abcdef"  # noqa: S105  (a test value)
    text = config_text() + '\n[http]\nread_token_env = "OPENBELL_READ_TOKEN"\n'
    config = load(tmp_path, text)
    found = secrets.configured_secrets(config, {"OPENBELL_READ_TOKEN": token})
    assert [(s.source, s.value) for s in found] == [("env OPENBELL_READ_TOKEN", token)]
    assert (
        secrets.redactor_for(config, {"OPENBELL_READ_TOKEN": token}).mask_values(token) == REDACTED
    )
