"""The chat-completions client: one OpenAI-compatible endpoint over an injected `httpx.AsyncClient`.

This module owns the wire protocol and its failures. `ChatClient.complete` posts
`{base_url}/chat/completions` with the model, messages, tools (and a forced `tool_choice` when
the decision mode asks for one), temperature, max_tokens and any configured extra body fields and
headers (the API key goes only in the `Authorization` header and
never into a message, log or error), and parses the answer once (`parse.parse_completion`),
adding the provider's revision headers (`REVISION_HEADERS`) to the completion's identity. An
`Answer` carries the exchange as recorded (`answers.py`): the request's digest and the response
body as received; with a `transport` (`answers.RecordedTransport`) the client asks no network.
Retryable failures (HTTP 429, 5xx, timeouts and other transport errors, and a 200 whose body is
not a completion) are retried with exponential backoff and jitter, honouring `Retry-After` in
seconds. An endpoint that cannot be connected to at all (connection refused, unknown host, no
route: `httpx.ConnectError`) is not retried: nothing listens there, and waiting would only spend
the cycle (a replay pointed at nothing used to spend a minute a slot), so the call fails at once
and the next cycle tries once again. The sleep, the random source and the monotonic clock are
injected, so tests take no time. Every request is an `Attempt` (its number, latency, and for a
failed one the `AttemptError` kind, a one-line redacted message and the wait before the next
try), reported to the caller's `on_attempt` as it ends, the failed ones too, so none goes
unrecorded even when the call raises.
Errors are translated into the openbell tree (STYLE §8, drawn in `markets.errors`, where these
three classes live), by what the caller must do:

```
LlmUnavailable(TransientError)  retries exhausted: the cycle fails, the next slot tries again
LlmRefused(AgentError)          another 4xx (400, 413, 422, ...): the request itself was refused,
                                e.g. a conversation past the context window; not retried
LlmAuthError(OperatorError)     401, 403 or 404: a bad key, no access, or a wrong base_url or
                                model; an operator must fix the config: the account is paused
```
"""

from __future__ import annotations

import asyncio
import enum
import json
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Final

import httpx

from openbell.agents.llm.answers import UnrecordedRequest, request_digest
from openbell.agents.llm.completion import (
    MAX_IDENTITY_CHARS,
    Completion,
    MalformedResponse,
    cut,
    parse_completion,
    wire_json,
)
from openbell.markets.errors import LlmAuthError, LlmRefused, LlmUnavailable
from openbell.store.redact import Redactor

#: Status codes that mean "this request will never work with this config".
AUTH_STATUSES: Final = frozenset({401, 403, 404})
#: The response headers that name the model's revision, as providers send them (OpenAI's
#: `openai-model` names the dated snapshot behind an alias); kept as `name=value; ...`.
REVISION_HEADERS: Final = ("openai-model", "x-model-revision", "x-model-version")
#: The longest `Retry-After` honoured, in seconds.
MAX_RETRY_AFTER_S: Final = 120.0
_ERROR_BODY_CHARS: Final = 300


class AttemptError(enum.StrEnum):
    """Why one request to the model failed."""

    RATE_LIMITED = "rate_limited"  # HTTP 429
    SERVER_ERROR = "server_error"  # HTTP 5xx
    TIMEOUT = "timeout"
    TRANSPORT = "transport_error"  # the connection failed
    UNREACHABLE = "unreachable"  # no connection could be made (refused, unknown host): not retried
    INVALID_BODY = "invalid_body"  # a 200 whose body is not a JSON object
    NO_COMPLETION = "no_completion"  # a JSON object without a usable choice (empty `choices`)
    REFUSED = "refused"  # another 4xx: not retried
    AUTH = "auth"  # 401, 403, 404: not retried
    CANCELLED = "cancelled"  # cut off by the caller (the cycle's wall budget)
    UNRECORDED = "unrecorded"  # a re-run from recorded answers asked what was never recorded


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One request to the model: its `number` in the call (from 1), its `latency_ms`, and for a
    failed one its `error`, a one-line `message` (secrets masked) and `retry_in_s`, the wait
    before the next attempt (None when none follows)."""

    number: int
    latency_ms: int
    error: AttemptError | None = None
    message: str = ""
    retry_in_s: float | None = None

    @property
    def ok(self) -> bool:
        """Whether this request got a completion."""
        return self.error is None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """One endpoint and model. `api_key` is the resolved secret (never shown in `repr`)."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    temperature: float = 0.0
    max_tokens: int = 4096
    extra_headers: Mapping[str, str] = field(default_factory=dict)
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {self.base_url!r}")
        if not self.model:
            raise ValueError("model must not be empty")
        if self.max_retries < 0 or self.timeout_s <= 0 or self.backoff_base_s < 0:
            raise ValueError("max_retries, timeout_s and backoff_base_s must be non-negative")
        reserved = {"model", "messages", "tools"} & set(self.extra_body)
        if reserved:
            raise ValueError(f"extra_body may not set {sorted(reserved)}")

    @property
    def url(self) -> str:
        """The chat-completions URL."""
        return self.base_url.rstrip("/") + "/chat/completions"


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """A completion with what getting it took: `latency_ms` of the request that got it, and
    `attempts`, every request of the call (the last one got it); and the exchange to record:
    `request_digest` (`answers.request_digest` of the body sent) and `response`, the body
    received."""

    completion: Completion
    latency_ms: int
    attempts: tuple[Attempt, ...]
    request_digest: str = ""
    response: str = ""


Sleep = Callable[[float], Awaitable[None]]
#: Called with each `Attempt` as it ends.
OnAttempt = Callable[[Attempt], None]


@dataclass(frozen=True, slots=True)
class _Failure:
    """A failed request worth retrying: why, and the server's `Retry-After` in seconds."""

    error: AttemptError
    message: str
    retry_after_s: float | None = None
    final: bool = False  # not worth retrying after all (`UNREACHABLE`)


class ChatClient:
    """Chat completions against one endpoint; see the module docstring.

    With `http` the client uses that `httpx.AsyncClient` (tests pass one on a `MockTransport`;
    the caller closes it). Without, `connect()` opens one per use and closes it after, on
    `transport` when given (`answers.RecordedTransport`: no network).
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        http: httpx.AsyncClient | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self._http = http
        self._transport = transport
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()  # noqa: S311  (jitter only)
        self._monotonic = monotonic
        # The body's fields other than messages and tools, as wire JSON without its braces.
        fixed = {key: value for key, value in self._body((), None).items() if key != "messages"}
        self._fixed_json = wire_json(fixed)[1:-1]
        # The request's URL, headers and timeout as httpx's objects, made at the first request
        # (which raises, as every request would, if they are invalid) and reused.
        self._parts: tuple[httpx.URL, httpx.Headers, httpx.Timeout] | None = None
        self.redact = Redactor([config.api_key])

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Chat]:
        """A `Chat` on the injected HTTP client, or on a new one closed on exit."""
        if self._http is not None:
            yield Chat(self, self._http)
            return
        async with httpx.AsyncClient(
            timeout=self.config.timeout_s, transport=self._transport
        ) as http:
            yield Chat(self, http)

    def _request_parts(self) -> tuple[httpx.URL, httpx.Headers, httpx.Timeout]:
        parts = self._parts
        if parts is None:
            parts = self._parts = (
                httpx.URL(self.config.url),
                httpx.Headers(self._headers()),
                httpx.Timeout(self.config.timeout_s),
            )
        return parts

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **self.config.extra_headers}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return headers

    def _body(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        tool_choice: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": list(messages),
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }
        if tools:
            body["tools"] = list(tools)
        body.update(self.config.extra_body)
        if tool_choice is not None:  # a forced call wins over any tool_choice in extra_body
            body["tool_choice"] = dict(tool_choice)
        return body

    def _body_json(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        wire: WireCache | None,
        tool_choice: Mapping[str, Any] | None = None,
    ) -> str:
        """The request body as sent: `wire_json` of `_body`, its messages and tools taken from
        `wire` when given (the same text, each part encoded once). A request that forces a tool
        call (`tool_choice`) is encoded whole."""
        if wire is None or tool_choice is not None:
            return wire_json(self._body(messages, tools, tool_choice))
        sent = ",".join(wire.text(message) for message in messages)
        offered = f',"tools":{wire.text(tools)}' if tools else ""
        return f'{{"messages":[{sent}],{self._fixed_json}{offered}}}'

    async def complete(
        self,
        http: httpx.AsyncClient,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        on_attempt: OnAttempt | None = None,
        wire: WireCache | None = None,
        tool_choice: Mapping[str, Any] | None = None,
    ) -> Answer:
        """The model's answer to `messages` (with `tools` offered; `tool_choice`, when given, sent
        as the request's `tool_choice`), retried as documented; each attempt is passed to
        `on_attempt` as it ends. With `wire`, each message and the tools are encoded once (a
        cycle's conversation only grows) and the body assembled from their text."""
        body = self._body_json(messages, tools, wire, tool_choice)
        prompt_chars = len(body)  # the tool schemas are billed as input too
        sent = body.encode("utf-8")
        attempts: list[Attempt] = []

        def report(attempt: Attempt) -> Attempt:
            attempts.append(attempt)
            if on_attempt is not None:
                on_attempt(attempt)
            return attempt

        while True:
            number = len(attempts) + 1
            started = self._monotonic()
            try:
                outcome = await self._attempt(http, sent, prompt_chars, bool(tools))
            except LlmAuthError as exc:
                report(self._failed(number, started, AttemptError.AUTH, str(exc)))
                raise
            except LlmRefused as exc:
                report(self._failed(number, started, AttemptError.REFUSED, str(exc)))
                raise
            except asyncio.CancelledError:
                report(self._failed(number, started, AttemptError.CANCELLED, "cut off"))
                raise
            if isinstance(outcome, tuple):
                done = report(Attempt(number=number, latency_ms=self._ms_since(started)))
                return Answer(
                    completion=outcome[0],
                    latency_ms=done.latency_ms,
                    attempts=(*attempts,),
                    request_digest=request_digest(sent),
                    response=outcome[1],
                )
            retry_in_s = (
                self._delay(number, outcome.retry_after_s)
                if number <= self.config.max_retries and not outcome.final
                else None
            )
            report(self._failed(number, started, outcome.error, outcome.message, retry_in_s))
            if retry_in_s is None:
                raise LlmUnavailable(
                    f"{self.config.model} at {self.config.base_url}: {outcome.message} "
                    f"({'not retried' if outcome.final else f'gave up after {number} attempts'})",
                    tuple(attempts),
                )
            await self._sleep(retry_in_s)

    def _ms_since(self, started: float) -> int:
        return round((self._monotonic() - started) * 1000)

    def _failed(
        self,
        number: int,
        started: float,
        error: AttemptError,
        message: str,
        retry_in_s: float | None = None,
    ) -> Attempt:
        return Attempt(
            number=number,
            latency_ms=self._ms_since(started),
            error=error,
            message=message,
            retry_in_s=retry_in_s,
        )

    async def _attempt(
        self, http: httpx.AsyncClient, body: bytes, prompt_chars: int, with_tools: bool
    ) -> tuple[Completion, str] | _Failure:
        """One request: the completion and the response body, or the failure when it is worth
        retrying."""
        try:
            url, headers, timeout = self._request_parts()
            response = await http.post(url, content=body, headers=headers, timeout=timeout)
        except UnrecordedRequest as exc:
            return _Failure(AttemptError.UNRECORDED, str(exc), final=True)
        except httpx.TimeoutException as exc:
            return _Failure(AttemptError.TIMEOUT, f"timed out ({type(exc).__name__})")
        except httpx.ConnectError as exc:
            why = self.redact.mask(str(exc)) or type(exc).__name__
            return _Failure(AttemptError.UNREACHABLE, f"cannot connect: {why}", final=True)
        except httpx.TransportError as exc:
            why = self.redact.mask(str(exc)) or type(exc).__name__
            return _Failure(AttemptError.TRANSPORT, f"transport error: {why}")
        status = response.status_code
        if status == 429 or status >= 500:
            return _Failure(
                AttemptError.RATE_LIMITED if status == 429 else AttemptError.SERVER_ERROR,
                f"HTTP {status}{self._error_suffix(response)}",
                _retry_after(response.headers.get("retry-after")),
            )
        if status in AUTH_STATUSES:
            raise LlmAuthError(
                f"{self.config.model} at {self.config.base_url}: HTTP {status}: "
                f"{self._error_text(response)}; check base_url, model and the key's variable",
                status=status,
            )
        if status >= 400:
            raise LlmRefused(
                f"HTTP {status} from {self.config.model}: {self._error_text(response)}",
                status=status,
            )
        try:
            payload = response.json()
        except ValueError:
            return _Failure(AttemptError.INVALID_BODY, "the response body is not JSON")
        if not isinstance(payload, dict):
            return _Failure(AttemptError.INVALID_BODY, "the response body is not a JSON object")
        try:
            completion = parse_completion(
                payload, prompt_chars=prompt_chars, recover_text_calls=with_tools
            )
        except MalformedResponse as exc:
            error = payload.get("error")
            return _Failure(
                AttemptError.NO_COMPLETION, f"{exc}{f': {self._clip(str(error))}' if error else ''}"
            )
        revision = self._revision(response.headers)
        text = response.text
        return (completion if revision is None else replace(completion, revision=revision)), text

    def _revision(self, headers: httpx.Headers) -> str | None:
        """The `REVISION_HEADERS` the response carried, as `name=value; ...` (secrets masked,
        cut), or None when it carried none."""
        found = [
            f"{name}={' '.join(headers[name].split())}"
            for name in REVISION_HEADERS
            if headers.get(name, "").strip()
        ]
        if not found:
            return None
        return cut(self.redact.mask("; ".join(found)), MAX_IDENTITY_CHARS)

    def _delay(self, attempt: int, retry_after_s: float | None) -> float:
        """Seconds to wait before retry number `attempt`: Retry-After, else capped backoff with
        jitter (a random half to whole of the exponential step)."""
        if retry_after_s is not None:
            return min(retry_after_s, MAX_RETRY_AFTER_S)
        step = min(self.config.backoff_max_s, self.config.backoff_base_s * 2.0 ** (attempt - 1))
        return step * (0.5 + self._rng.random() / 2)

    def _error_suffix(self, response: httpx.Response) -> str:
        """`: ` and the error text of a failed response, or nothing when it has no body."""
        return f": {self._error_text(response)}" if response.content.strip() else ""

    def _error_text(self, response: httpx.Response) -> str:
        try:
            payload = response.json()
        except ValueError:
            return self._clip(response.text)
        error = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return self._clip(error["message"])
        return self._clip(json.dumps(payload, default=str))

    def _clip(self, text: str) -> str:
        text = self.redact.mask(" ".join(text.split()))
        return text if len(text) <= _ERROR_BODY_CHARS else text[:_ERROR_BODY_CHARS] + "..."


class WireCache:
    """The wire JSON of objects sent again and again (a cycle's messages and tools), by identity:
    an object is encoded once, and must not change after it was first sent."""

    __slots__ = ("_texts",)

    def __init__(self) -> None:
        self._texts: dict[int, tuple[object, str]] = {}

    def text(self, value: object) -> str:
        """`wire_json(value)`, encoded on the first call for this object."""
        found = self._texts.get(id(value))
        if found is not None and found[0] is value:
            return found[1]
        text = wire_json(value)
        self._texts[id(value)] = (value, text)  # the object is kept, so its id is not reused
        return text


@dataclass(frozen=True, slots=True)
class Chat:
    """A `ChatClient` bound to an open HTTP client, for one agent's cycle (whose conversation it
    encodes incrementally)."""

    client: ChatClient
    http: httpx.AsyncClient
    wire: WireCache = field(default_factory=WireCache)

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        on_attempt: OnAttempt | None = None,
        tool_choice: Mapping[str, Any] | None = None,
    ) -> Answer:
        """See `ChatClient.complete`."""
        return await self.client.complete(
            self.http,
            messages,
            tools,
            on_attempt=on_attempt,
            wire=self.wire,
            tool_choice=tool_choice,
        )


def _retry_after(value: str | None) -> float | None:
    """`Retry-After` in seconds (an HTTP date is not honoured: that needs the wall clock)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
