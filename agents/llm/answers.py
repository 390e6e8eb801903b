"""Recorded model answers: a request's digest, and a transport that answers from a ledger's record.

This module owns what makes an LLM agent's cycle re-runnable with no endpoint. Every exchange is
recorded on its `assistant` trace row with `request_digest`, the sha256 of the request body
exactly as it was sent (`request_digest`: the chat-completions JSON, whose fields are the model,
the messages, the tools offered, `tool_choice` when the mode forces one, temperature, max_tokens
and the entry's `extra_body`; not the URL, the headers or the API key), and the response body as
received. `AnswerBook` holds a ledger's recorded exchanges by digest (and each account's masking
key, which a masked agent's prompts depend on); `RecordedTransport` is an `httpx` transport that
answers a request with the recorded response of its digest (its revision headers rebuilt from the
recorded `revision`) and raises `UnrecordedRequest` for a request never recorded, so a replay
that drifts from the record fails that cycle instead of calling a network. `RecordedKeys` is the
masking-key port of a re-run: an account without a key of its own takes the one its agent's
account had in the recorded ledger, so its aliases, day labels and money unit, and hence its
requests, are the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

import httpx

from openbell.agents.protocol import MaskingKeys
from openbell.store.exchanges import RecordedAnswer
from openbell.store.masking_keys import MaskingKey

#: The prefix of a stored digest (the algorithm, so that another could follow).
DIGEST_PREFIX: Final = "sha256:"


def request_digest(body: bytes) -> str:
    """The digest a request is recorded and looked up by: `sha256:` and the hex sha256 of its
    body as sent."""
    return DIGEST_PREFIX + hashlib.sha256(body).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerBook:
    """A ledger's recorded exchanges by request digest, and its masked accounts' keys by
    (agent, market). `source` names the ledger (for messages)."""

    source: str
    answers: Mapping[str, RecordedAnswer] = field(default_factory=dict)
    keys: Mapping[tuple[str, str], MaskingKey] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.answers)


class UnrecordedRequest(httpx.TransportError):
    """A request whose digest the answer book does not hold: the run left the record."""


class RecordedTransport(httpx.AsyncBaseTransport):
    """Answers each request from an `AnswerBook`; see the module docstring."""

    def __init__(self, book: AnswerBook) -> None:
        self._book = book

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The recorded response to `request`; `UnrecordedRequest` when none was recorded."""
        body = await request.aread()
        digest = request_digest(body)
        found = self._book.answers.get(digest)
        if found is None:
            raise UnrecordedRequest(
                f"no recorded answer in {self._book.source} for request {digest}: this run "
                "asked what the recorded one did not",
                request=request,
            )
        return httpx.Response(
            200,
            content=found.response.encode("utf-8"),
            headers={"content-type": "application/json", **found.headers()},
            request=request,
        )


class RecordedKeys:
    """A masking-key port over `stored` (the re-run's ledger): an account with no key yet gets
    `recorded`, its agent's key in the recorded ledger, under its own account id."""

    def __init__(self, stored: MaskingKeys, recorded: MaskingKey | None) -> None:
        self._stored = stored
        self._recorded = recorded

    def masking_key(self, account_id: int) -> MaskingKey | None:
        """The stored key of `account_id`; else the recorded one, stored as its key first."""
        found = self._stored.masking_key(account_id)
        if found is not None or self._recorded is None:
            return found
        return self._stored.save_masking_key(replace(self._recorded, account_id=account_id))

    def save_masking_key(self, key: MaskingKey) -> MaskingKey:
        """Store what of `key` is missing; the stored key."""
        return self._stored.save_masking_key(key)
