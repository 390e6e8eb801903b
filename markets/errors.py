"""The one exception root of openbell, with classes grouped by what the caller must do.

```
OpenbellError                  root; the docstring is the default message
├── TransientError             retry later: network, rate limit, vendor 5xx, LLM timeout
│   └── DataUnavailable        a market-data source could not answer for a slot
├── RefusedError               refuse and record: a rule violation or bad agent output
│   └── AgentError             an agent's tool call or output could not be used
└── OperatorError              stop and call an operator
    ├── ConfigError            the configuration file is missing or invalid
    ├── SchemaError            the database schema is not what this version expects
    └── LedgerBreach           a ledger invariant does not hold
```

Vendor exceptions are translated at their adapter with `raise ... from exc`. An order refused by the
market rules is not an exception at all: execution returns a `Rejection`.
"""

from __future__ import annotations

from collections.abc import Iterable


class OpenbellError(Exception):
    """Unexpected openbell error."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class TransientError(OpenbellError):
    """A temporary failure; the same call may succeed later."""


class DataUnavailable(TransientError):
    """A market-data source could not answer.

    `cause` says why when the adapter knows better than the exception chain (see
    `markets.failures`: "dns", "connect", "timeout", "http_503", "empty", ...; None: read it from
    the chain); `symbols` are the symbols that failed when not the whole read.
    """

    def __init__(
        self, message: str | None = None, *, cause: str | None = None, symbols: Iterable[str] = ()
    ) -> None:
        super().__init__(message)
        self.cause = cause
        self.symbols = tuple(symbols)


class RefusedError(OpenbellError):
    """A request was refused and recorded; retrying it unchanged will not help."""


class AgentError(RefusedError):
    """An agent's tool call or output could not be used."""


class OperatorError(OpenbellError):
    """A problem only an operator can fix."""


class ConfigError(OperatorError):
    """The configuration is missing or invalid."""


class SchemaError(OperatorError):
    """The database schema is not the one this version of openbell expects."""


class LedgerBreach(OperatorError):
    """A ledger invariant does not hold."""
