"""`[notify]`: the URLs from the file and the environment, a variable not set named, a bad digest
time or event refused, and no sink without a URL."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import NOTIFY_EVENTS, NotifyConfig
from openbell.ops.notify import notify_urls


def test_urls_come_from_the_file_then_the_environment() -> None:
    config = NotifyConfig(urls=("json://127.0.0.1:9000/a",), urls_env=("HOOKS",))
    environ = {"HOOKS": "tgram://token/chat, slack://a/b/c"}
    assert notify_urls(config, environ) == [
        "json://127.0.0.1:9000/a",
        "tgram://token/chat",
        "slack://a/b/c",
    ]


def test_a_urls_env_not_set_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="HOOKS"):
        notify_urls(NotifyConfig(urls_env=("HOOKS",)), {})


@pytest.mark.parametrize(
    "bad",
    [{"digest_at": "25:00"}, {"events": ("model_changed",)}, {"urls_env": ("not-a-name",)}],
)
def test_bad_values_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        NotifyConfig.model_validate(bad)


def test_every_event_is_on_by_default_and_no_url_sends_nothing() -> None:
    config = NotifyConfig()
    assert config.events == NOTIFY_EVENTS
    assert notify_urls(config, {}) == []
