"""What the daemon does about an exception: the one mapping from (error class, stage) to action.

This module owns `action_for` (STYLE §8): the retrying source, the cycle runner and the NAV
valuation ask it, for replay and live alike, and nothing else decides whether an exception is
retried, skips a slot's cycles, fails one cycle, pauses an account or stops. The exception tree
itself is drawn in `openbell.markets.errors`. What each action means:

- `RETRY`: read again after a backoff, while the slot's grace lasts (`retrying.py`); once the
  grace is spent, the error goes to the stage that read.
- `SKIP`: the slot cannot be served: every claimed cycle of the slot is `skipped`
  (`data_unavailable`).
- `FAIL`: this one cycle is `failed` (error class and message stored); the slot goes on.
- `PAUSE`: this one cycle is `failed`, and its account is paused for the rest of the run
  (`account_paused`, logged once): its later slots are not run; the slot's other agents run
  normally. A replay finishes the other accounts and then exits 2 naming the paused accounts
  (`AccountsPaused`); the live daemon goes on with the others. A restart with the cause fixed runs
  the account again (a replay with `--resume`).
- `STOP`: the error is raised out of the stage: the slot stops and releases the claims it had not
  finished; a replay stops with the error (`openbell: error: ...`), the live daemon logs
  `slot_failed` and goes on ringing, and the next claim sweep completes the released cycles while
  their grace lasts. A slot stopped because the store is unavailable (`store_unavailable`) is run
  again, live, while its grace lasts: its claims may not have been written at all.
"""

from __future__ import annotations

import enum

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError

from openbell.markets.errors import NotServed, OperatorError, TransientError


class Stage(enum.StrEnum):
    """The part of a cycle an exception came from."""

    READ = "read"  # one market-data read of a live source
    OBSERVE = "observe"  # the slot's market snapshot
    DECIDE = "decide"  # an agent's decision, its tool calls and orders
    SNAPSHOT = "snapshot"  # an account's NAV snapshot


class Action(enum.StrEnum):
    """What the daemon does about an exception (see the module docstring)."""

    RETRY = "retry"
    SKIP = "skip"
    FAIL = "fail"
    PAUSE = "pause"
    STOP = "stop"


def action_for(stage: Stage, exc: Exception) -> Action:
    """The one mapping from exception classes to actions, by the stage that raised them.

    A database error stops the slot wherever it comes from. A read is retried only on a transient
    error (a timeout, a rate limit, a vendor 5xx); anything else (a `NotServed` interval or symbol
    included: asking again cannot help) goes at once to the stage that read. While observing, data
    that cannot be had (transient, or not served) skips the slot; an operator error or anything
    else (a bug of ours) stops it. While deciding, an operator error (an LLM agent's rejected key,
    `LlmAuthError`; a ledger breach on its account) pauses that agent's account, and anything else
    an agent raises (its own bug, a refused output, a timeout, a transient LLM error) fails only
    its cycle. A failure to value an account fails its cycle, unless an operator must act.
    """
    if isinstance(exc, SQLAlchemyError):
        return Action.STOP
    if stage is Stage.READ:
        return Action.RETRY if isinstance(exc, TransientError) else Action.STOP
    if stage is Stage.OBSERVE:
        return Action.SKIP if isinstance(exc, TransientError | NotServed) else Action.STOP
    if isinstance(exc, OperatorError):
        return Action.PAUSE if stage is Stage.DECIDE else Action.STOP
    return Action.FAIL


def store_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the store cannot be used now, rather than that a statement is wrong: a
    connection that cannot be made or was lost (Postgres stopped, restarting, out of reach), a
    SQLite file that is full, locked or cannot be written (`OperationalError`, `InterfaceError`,
    or any database error that invalidated its connection). Asking again later may succeed."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated
