"""Recorded answers at the edges: the digest of a request body, the transport that answers from
a book (its revision headers rebuilt, a request not recorded refused as `UnrecordedRequest`, and
through `ChatClient`, a cycle-ending `LlmUnavailable` that names the request), the masking-key port
that hands an account its agent's recorded key, `--swap-model` values, and the names of a split
agent's generations."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import date
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from openbell.agents.llm.answers import (
    AnswerBook,
    RecordedKeys,
    RecordedTransport,
    UnrecordedRequest,
    request_digest,
)
from openbell.agents.llm.client import AttemptError, ChatClient, ClientConfig
from openbell.daemon.splitting import next_generation
from openbell.markets.errors import ConfigError, LlmUnavailable
from openbell.ops.config.schema import LlmAgentConfig, load_config
from openbell.ops.wiring.recorded_answers import Swap, answering_of, parse_swap, swapped_config
from openbell.store.exchanges import RecordedAnswer
from openbell.store.masking_keys import MaskingKey
from openbell_testkit.llm import ScriptedModel, completion

CONFIG = ClientConfig(base_url="https://llm.test/v1", model="m-1", api_key="sk-secret-123456")


def test_the_digest_is_the_sha256_of_the_body_as_sent() -> None:
    body = b'{"messages":[],"model":"m"}'
    assert request_digest(body) == "sha256:" + hashlib.sha256(body).hexdigest()
    assert request_digest(body) != request_digest(body + b" ")


def record(model: ScriptedModel, revision: str | None = None) -> AnswerBook:
    """The book of what `model` was asked (as the client sent it) and answered."""
    client = ChatClient(CONFIG, http=model.client())

    async def ask() -> tuple[str, str]:
        async with client.connect() as chat:
            answer = await chat.complete([{"role": "user", "content": "hello"}])
        return answer.request_digest, answer.response

    digest, response = asyncio.run(ask())
    assert digest == request_digest(model.sent[-1])
    return AnswerBook(
        source="ledger.db", answers={digest: RecordedAnswer(response=response, revision=revision)}
    )


def test_a_recorded_request_is_answered_from_the_book_with_its_revision_headers() -> None:
    book = record(ScriptedModel([completion("Hold.", model="m-1-0601")]), "openai-model=m-0601")
    client = ChatClient(CONFIG, transport=RecordedTransport(book))

    async def ask() -> str | None:
        async with client.connect() as chat:
            answer = await chat.complete([{"role": "user", "content": "hello"}])
        assert answer.completion.model == "m-1-0601"
        return answer.completion.revision

    assert asyncio.run(ask()) == "openai-model=m-0601"


def test_a_request_never_recorded_fails_the_call_at_once_and_names_its_digest() -> None:
    book = record(ScriptedModel([completion("Hold.")]))
    client = ChatClient(CONFIG, transport=RecordedTransport(book))
    attempts = []

    async def ask() -> None:
        async with client.connect() as chat:
            await chat.complete([{"role": "user", "content": "hello!"}], on_attempt=attempts.append)

    with pytest.raises(
        LlmUnavailable, match=r"no recorded answer in ledger\.db for request sha256:"
    ):
        asyncio.run(ask())
    assert [attempt.error for attempt in attempts] == [AttemptError.UNRECORDED]


def test_the_transport_raises_unrecorded_request_itself() -> None:
    transport = RecordedTransport(AnswerBook(source="x"))
    request = httpx.Request("POST", "https://llm.test/v1/chat/completions", content=b"{}")
    with pytest.raises(UnrecordedRequest):
        asyncio.run(transport.handle_async_request(request))


class Keys:
    def __init__(self) -> None:
        self.stored: dict[int, MaskingKey] = {}

    def masking_key(self, account_id: int) -> MaskingKey | None:
        return self.stored.get(account_id)

    def save_masking_key(self, key: MaskingKey) -> MaskingKey:
        return self.stored.setdefault(key.account_id, key)


def test_an_account_without_a_key_takes_its_agents_recorded_key_under_its_own_id() -> None:
    recorded = MaskingKey(
        account_id=7,
        epoch=date(2023, 1, 1),
        money_unit=Decimal("3.5"),
        aliases={"AAPL": "asset_0042"},
    )
    stored = Keys()
    keys = RecordedKeys(stored, recorded)
    found = keys.masking_key(2)
    assert found is not None
    assert (found.account_id, found.epoch, found.money_unit, dict(found.aliases)) == (
        2,
        recorded.epoch,
        recorded.money_unit,
        {"AAPL": "asset_0042"},
    )
    assert stored.stored[2] == found
    assert RecordedKeys(Keys(), None).masking_key(2) is None


def test_swap_values() -> None:
    assert parse_swap("llm-a=gpt-4o-mini") == Swap(agent="llm-a", model="gpt-4o-mini")
    assert parse_swap("a=m@http://127.0.0.1:9/v1") == Swap(
        agent="a", model="m", base_url="http://127.0.0.1:9/v1"
    )
    for bad in ("llm-a", "=m", "a=", "a=m@"):
        with pytest.raises(ConfigError, match="NAME=MODEL"):
            parse_swap(bad)


def test_a_swapped_config_asks_the_new_model_priced_by_its_own_table(tmp_path: Path) -> None:
    path = tmp_path / "openbell.toml"
    path.write_text(
        '[markets.us]\nuniverse = "nasdaq100"\ncadence = "daily"\nsource = "yfinance"\n'
        'initial_cash = "10000"\n\n[prices."m-2"]\nin_per_mtok = "1"\nout_per_mtok = "2"\n\n'
        '[[agents]]\nname = "a"\nkind = "llm"\nmarkets = ["us"]\n'
        'base_url = "http://127.0.0.1:1/v1"\nmodel = "m-1"\n'
        'price_in_per_mtok = "5"\nprice_out_per_mtok = "6"\n\n'
        '[[agents]]\nname = "hold"\nkind = "buy_and_hold"\nmarkets = ["us"]\n',
        encoding="utf-8",
    )
    config = load_config(path)
    swapped = swapped_config(config, [Swap(agent="a", model="m-2", base_url="http://h:2/v1")])
    (agent, _) = swapped.agents_in("us")
    assert isinstance(agent, LlmAgentConfig)
    assert (agent.name, agent.model, agent.base_url) == ("a", "m-2", "http://h:2/v1")
    assert agent.price_in_per_mtok == Decimal(1)
    with pytest.raises(ConfigError, match="hold is not an LLM agent"):
        swapped_config(config, [Swap(agent="hold", model="m-2")])


def test_generations_of_a_split_agent() -> None:
    assert next_generation("gpt") == "gpt~2"
    assert next_generation("gpt~2") == "gpt~3"
    assert next_generation("gpt.seed1~9") == "gpt.seed1~10"


def test_under_seeds_every_run_of_a_swapped_agent_is_swapped() -> None:
    book = AnswerBook(source="x")
    found = answering_of(book, [Swap(agent="a", model="m")], seeds=2)
    assert found.swapped == {"a", "a.seed1", "a.seed2"}
    assert found.for_agent("a.seed2") is None
    assert found.for_agent("b.seed1") is book
