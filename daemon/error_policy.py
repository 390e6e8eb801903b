"""What the cycle loop does about an exception: the one mapping from error classes to actions.

This module owns `action_for` (STYLE §8): the daemon's cycle runner and its NAV valuation ask it,
and nothing else decides, whether an exception skips a cycle, fails only that cycle, or stops the
run for an operator. The exception tree itself lives in `openbell.markets.errors`.
"""

from __future__ import annotations

import enum

from sqlalchemy.exc import SQLAlchemyError

from openbell.markets.errors import OperatorError, TransientError


class Stage(enum.StrEnum):
    """The part of a cycle an exception came from."""

    OBSERVE = "observe"
    DECIDE = "decide"
    SNAPSHOT = "snapshot"


class Action(enum.StrEnum):
    """What the cycle loop does about an exception."""

    SKIP = "skip"  # the slot cannot be served: the cycle is skipped (data_unavailable)
    FAIL = "fail"  # this cycle failed (error class and message stored); the loop goes on
    STOP = "stop"  # an operator must act: the failure is recorded if it can be, then re-raised


def action_for(stage: Stage, exc: Exception) -> Action:
    """The one mapping from exception classes to cycle-loop actions.

    Operator errors (bad config, schema drift, a ledger breach) and database errors stop the run,
    whatever raised them. Market data that cannot be had while observing skips the slot; anything
    else while observing is a bug of ours and stops the run. Anything an agent raises while deciding
    (its own bug, a refused output, a timeout, a transient LLM error) and any failure to value its
    account fails only its cycle.
    """
    if isinstance(exc, OperatorError | SQLAlchemyError):
        return Action.STOP
    if stage is Stage.OBSERVE:
        return Action.SKIP if isinstance(exc, TransientError) else Action.STOP
    return Action.FAIL
