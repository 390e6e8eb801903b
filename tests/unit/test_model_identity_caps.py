"""Model identity as a response reports it (the `model`, `system_fingerprint` and revision
headers, each hostile text), and dollar caps: their config (a cap on an unpriced model is a config
error), and the guard that skips a spent account's cycles."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.llm.completion import MAX_IDENTITY_CHARS, parse_completion
from openbell.agents.llm.model_watch import ModelIdentity, ModelWatch
from openbell.agents.llm.spend_caps import SpendCaps
from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import LlmAgentConfig, load_config
from openbell.ops.wiring.llm_agents import build_llm_agent
from openbell_testkit.llm import completion

KEY = "sk-identity-test-0123456789"


def test_a_completion_keeps_the_reported_model_and_fingerprint() -> None:
    body = completion("hi", model="gpt-x-2025-01-01") | {"system_fingerprint": "fp_44709d6fcb"}
    parsed = parse_completion(body, prompt_chars=10)
    assert (parsed.model, parsed.system_fingerprint) == ("gpt-x-2025-01-01", "fp_44709d6fcb")


@pytest.mark.parametrize("value", [None, 7, "", "   ", ["fp"], {"a": 1}])
def test_a_missing_or_non_text_identity_is_none(value: object) -> None:
    body = completion("hi") | {"model": value, "system_fingerprint": value}
    parsed = parse_completion(body, prompt_chars=10)
    assert (parsed.model, parsed.system_fingerprint) == (None, None)


def test_a_long_reported_identity_is_cut() -> None:
    body = completion("hi", model="m" * 10_000) | {"system_fingerprint": "f" * 10_000}
    parsed = parse_completion(body, prompt_chars=10)
    assert parsed.model is not None
    assert parsed.system_fingerprint is not None
    assert parsed.model.startswith("m" * MAX_IDENTITY_CHARS)
    assert len(parsed.model) < 300
    assert len(parsed.system_fingerprint) < 300


def _answer_with(headers: dict[str, str]) -> str | None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=completion("hi"), headers=headers)

    async def ask() -> str | None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            client = ChatClient(
                ClientConfig(base_url="https://llm.test/v1", model="m", api_key=KEY), http=http
            )
            answer = await client.complete(http, [{"role": "user", "content": "hi"}])
            return answer.completion.revision

    return asyncio.run(ask())


def test_the_providers_revision_headers_are_kept_in_order() -> None:
    found = _answer_with({"x-model-revision": "r7", "openai-model": "gpt-4o-2024-08-06"})
    assert found == "openai-model=gpt-4o-2024-08-06; x-model-revision=r7"
    assert _answer_with({"x-other": "1"}) is None


def test_a_revision_header_never_carries_the_key_into_the_ledger() -> None:
    found = _answer_with({"x-model-revision": f"build {KEY}\r"})
    assert found is not None
    assert KEY not in found
    assert found.startswith("x-model-revision=build ")


def test_the_watch_reports_a_change_per_account_and_not_the_first_sighting() -> None:
    watch = ModelWatch()
    first = ModelIdentity(model="m", fingerprint="fp_a", revision=None)
    second = ModelIdentity(model="m", fingerprint="fp_b", revision=None)
    assert watch.observe(1, first) is None
    assert watch.observe(1, first) is None
    assert watch.observe(2, second) is None  # another account's first
    assert watch.observe(1, second) == first
    assert watch.observe(1, second) is None


@pytest.mark.parametrize("cap", [Decimal(0), Decimal(-1), Decimal("NaN"), Decimal("Infinity")])
def test_a_cap_must_be_positive(cap: Decimal) -> None:
    with pytest.raises(ValueError, match="positive"):
        SpendCaps(per_day=cap)


BASE = """
[markets.us]
universe = "nasdaq100"
cadence = "daily"
source = "yfinance"
initial_cash = "10000"

[[agents]]
name = "gpt"
kind = "llm"
markets = ["us"]
base_url = "https://api.openai.com/v1"
model = "gpt-4o-mini"
"""


def _load(tmp_path: Path, text: str) -> LlmAgentConfig:
    path = tmp_path / "openbell.toml"
    path.write_text(text, encoding="utf-8")
    agent = load_config(path).agents_in("us")[0]
    assert isinstance(agent, LlmAgentConfig)
    return agent


@pytest.mark.parametrize("key", ["max_usd_per_day", "max_usd_per_season"])
def test_a_cap_on_an_unpriced_model_is_a_config_error(tmp_path: Path, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, BASE + f'{key} = "5"\n')
    message = str(caught.value)
    assert f"agents[0].{key}" in message
    assert "unpriced" in message
    assert 'prices."gpt-4o-mini"' in message


def test_a_cap_priced_by_the_models_table_loads_and_builds(tmp_path: Path) -> None:
    table = '\n[prices."gpt-4o-mini"]\nin_per_mtok = "0.15"\nout_per_mtok = "0.60"\n'
    agent = _load(tmp_path, BASE + 'max_usd_per_day = "2.50"\nmax_usd_per_season = "40"\n' + table)
    assert (agent.max_usd_per_day, agent.max_usd_per_season) == (Decimal("2.50"), Decimal(40))
    built = build_llm_agent(agent, {})
    assert built.caps == SpendCaps(per_day=Decimal("2.50"), per_season=Decimal(40))


@pytest.mark.parametrize(("value", "words"), [("2.5", "float"), ('"0"', "positive")])
def test_a_bad_cap_names_its_key(tmp_path: Path, value: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, BASE + f"max_usd_per_day = {value}\n")
    assert "max_usd_per_day" in str(caught.value)
    assert words in str(caught.value)
