"""The one exception tree of openbell, with classes grouped by what the caller must do.

```
OpenbellError                  root; the docstring is the default message
├── TransientError             retry later: the same call may succeed
│   ├── DataUnavailable        a market-data source could not answer for now (timeout, 5xx, empty)
│   │   └── RateLimited        the vendor said "too often" (HTTP 429); `retry_after_s` if it said
│   └── LlmUnavailable         the model endpoint failed even after retries; `attempts`
├── NotServed                  the source does not serve this at all: retrying cannot help, ask
│   │                          for something else (not transient, not an operator's problem)
│   ├── IntervalUnavailable    bars of this `interval` are not served
│   └── SymbolUnavailable      this `symbol` is not known (delisted, renamed, never listed)
├── RefusedError               refuse and record: a rule violation or bad agent output
│   └── AgentError             an agent's tool call or output could not be used
│       └── LlmRefused         the model endpoint refused the request (another 4xx); `status`
├── CycleSkipped               an agent did not take its cycle (an outside agent absent); `reason`
│   └── ModelSplit             the model answered as another (`on_model_change = "split"`):
│                              the account closes, the agent trades on in a new one
├── ClaimLost                  a write for a cycle whose claim this run lost; `cycle_id`, `held_by`
└── OperatorError              an operator must fix something
    ├── ConfigError            the configuration is missing or invalid
    │   └── InvalidConfig      a config file that does not validate; `problems`
    ├── SchemaError            the database schema is not what this version expects
    ├── DatabaseDamaged        the ledger's file or indexes are damaged, or the file is empty
    ├── LedgerBreach           a ledger invariant does not hold
    ├── LlmAuthError           the model endpoint refused the key, model or URL; `status`
    ├── AccountsPaused         a run paused accounts for an operator error; `account_ids`
    ├── CalendarOutOfRange     an instant outside the sessions a trading calendar knows
    ├── BarFileError           a bar file is missing, unreadable or not canonical (a ValueError)
    ├── SourceFormatError      a vendor file is not in its importer's shape (a ValueError)
    ├── TraceNotFound          `openbell trace`: no such cycle
    ├── NoSuchAccount          `openbell positions`: no such account
    ├── NoSuchAgent            `openbell agent token`: no such agent in the ledger or config
    ├── ReportError            `openbell report`: no such agent, account or market
    ├── ExportError            `openbell export`: a value that the format cannot hold exactly
    └── SeasonError            `openbell season`: no such season, one already opened or closed
```

Every class lives here; the modules that raise them import them. Errors carry their facts as
attributes (`status`, `retry_after_s`, `interval`, `symbol`, `cause`, `symbols`, ...), not only in
their message. What the daemon does about each class, while observing, deciding or reading, is
decided in `openbell.daemon.error_policy` alone. Vendor exceptions are translated at their adapter
with `raise ... from exc`. An order refused by the market rules is not an exception at all:
execution returns a `Rejection`.

Exceptions that never leave the module raising them stay there, as its private control flow:
`execution._Refused` and akshare's `_NoData` (turned into a `Rejection` or a `DataUnavailable`
before they leave), `CalculationError` and `MalformedResponse` (turned into a tool error or a
retry of the model), `PathError` (turned into `InvalidConfig`'s problems) and
`daemon.stopping.StartupStopped` (a stop request during start-up, which ends the process).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class OpenbellError(Exception):
    """Unexpected openbell error."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


# -- transient: retry later ----------------------------------------------------------------------


class TransientError(OpenbellError):
    """A temporary failure; the same call may succeed later."""


class DataUnavailable(TransientError):
    """A market-data source could not answer.

    `cause` says why when the adapter knows better than the exception chain (see
    `adapters.failures`: "dns", "connect", "timeout", "http_503", "empty", ...; None: read it from
    the chain); `symbols` are the symbols that failed when not the whole read.
    """

    def __init__(
        self, message: str | None = None, *, cause: str | None = None, symbols: Iterable[str] = ()
    ) -> None:
        super().__init__(message)
        self.cause = cause
        self.symbols = tuple(symbols)


class RateLimited(DataUnavailable):
    """The vendor refused the request for calling too often; back off before asking again.

    `retry_after_s` is the wait the vendor asked for, when it said (None: it did not).
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        cause: str | None = None,
        symbols: Iterable[str] = (),
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message, cause=cause, symbols=symbols)
        self.retry_after_s = retry_after_s


class LlmUnavailable(TransientError):
    """The model endpoint did not answer successfully, even after retries; `attempts` are all
    the requests made (`agents.llm.client.Attempt`s)."""

    def __init__(self, message: str, attempts: Sequence[object] = ()) -> None:
        super().__init__(message)
        self.attempts = tuple(attempts)


# -- not served: ask for something else ----------------------------------------------------------


class NotServed(OpenbellError):
    """The source does not serve this at all; asking again cannot help."""


class IntervalUnavailable(NotServed):
    """The source does not serve bars of the requested interval; `interval` is the one asked."""

    def __init__(self, message: str | None = None, *, interval: str | None = None) -> None:
        super().__init__(message)
        self.interval = interval


class SymbolUnavailable(NotServed):
    """The vendor does not know the symbol (any more): delisted, renamed or never listed.

    Batch reads (`bars`, `quote`) leave such a symbol out of their result instead; a read about
    one symbol (an instrument's trading facts, fundamentals) raises this. `symbol` is the one
    asked, when one was.
    """

    def __init__(self, message: str | None = None, *, symbol: str | None = None) -> None:
        super().__init__(message)
        self.symbol = symbol


# -- refused: refuse and record ------------------------------------------------------------------


class RefusedError(OpenbellError):
    """A request was refused and recorded; retrying it unchanged will not help."""


class AgentError(RefusedError):
    """An agent's tool call or output could not be used."""


class LlmRefused(AgentError):
    """The model endpoint refused the request; `status` is its HTTP status."""

    def __init__(self, message: str | None = None, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


# -- operator: an operator must act --------------------------------------------------------------


class CycleSkipped(OpenbellError):
    """The agent did not take its cycle; the cycle is recorded `skipped` with `reason` (such as
    `agent_absent`: no outside client came by the deadline)."""

    def __init__(self, reason: str, message: str | None = None) -> None:
        super().__init__(message or f"cycle skipped: {reason}")
        self.reason = reason


class ModelSplit(CycleSkipped):
    """The model answered under another identity and the agent's `on_model_change` is
    `split`: the cycle ends (`skipped`, reason `model_changed`) before the answer is acted on,
    its account is closed, and the cycle runner opens a new account for the agent from this slot
    on. `before` and `after` describe the two identities."""

    def __init__(self, before: str, after: str) -> None:
        super().__init__(
            MODEL_CHANGED, f"the model answered as {after} (before: {before}): account split"
        )
        self.before = before
        self.after = after


#: The reason of a cycle ended by a model change under `on_model_change = "split"`.
MODEL_CHANGED = "model_changed"


class ClaimLost(OpenbellError):
    """A write for a cycle whose claim this run no longer holds (its lease ended and a peer took
    the cycle over, or it was finished or interrupted meanwhile): refused, nothing written."""

    def __init__(self, cycle_id: int, held_by: str) -> None:
        super().__init__(f"cycle {cycle_id} is no longer claimed by {held_by}")
        self.cycle_id = cycle_id
        self.held_by = held_by


class OperatorError(OpenbellError):
    """A problem only an operator can fix."""


class ConfigError(OperatorError):
    """The configuration is missing or invalid."""


class InvalidConfig(ConfigError):
    """A config file that does not validate: `problems` has one line per problem, each naming the
    file and the key; the exception's own text is the first of them and how many more there are.

    Every key is checked (unknown keys, types, values); the checks across keys (each agent's
    markets configured, no name twice) run once the keys they read are valid.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(problems[0] + more)
        self.problems = tuple(problems)


class SchemaError(OperatorError):
    """The database schema is not the one this version of openbell expects."""


class DatabaseDamaged(OperatorError):
    """The ledger database is damaged (SQLite's integrity checks fail, an index or constraint the
    ledger relies on is missing or invalid), or an empty file stands where a ledger should be.
    The message says what, without the database's name, which the caller adds."""


class LedgerBreach(OperatorError):
    """A ledger invariant does not hold."""


class LlmAuthError(OperatorError):
    """The model endpoint refused the credentials, the model or the URL; fix the agent's config.
    `status` is its HTTP status (401, 403 or 404)."""

    def __init__(self, message: str | None = None, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AccountsPaused(OperatorError):
    """A run paused accounts whose agent raised an operator error; `account_ids` are theirs."""

    def __init__(self, message: str | None = None, *, account_ids: Iterable[int] = ()) -> None:
        super().__init__(message)
        self.account_ids = tuple(account_ids)


class CalendarOutOfRange(OperatorError):
    """A date or instant lies outside the sessions a trading calendar knows."""


class BarFileError(OperatorError, ValueError):
    """A bar file is missing, unreadable or not in the canonical format."""


class SourceFormatError(OperatorError, ValueError):
    """A vendor file is not in the shape its importer expects."""


class TraceNotFound(OperatorError):
    """There is no such cycle in the ledger."""


class NoSuchAccount(OperatorError):
    """The ledger holds no account matching the filters."""


class NoSuchAgent(OperatorError):
    """The ledger (or the config) holds no such agent."""


class ReportError(OperatorError):
    """The ledger holds no such agent, account or market."""


class ExportError(OperatorError):
    """A ledger value cannot be written exactly in the chosen export format."""


class SeasonError(OperatorError):
    """A season that cannot be used: none of that name, one of that name already, or closed."""
