"""Stop requests: SIGINT and SIGTERM caught from the first moment of `openbell run`, and read by
start-up's checkpoints and by the running daemon's loop.

This module owns `StopRequest` and `StartupStopped`, and imports nothing heavy, so that the console
script (`ops/entry.py`) can catch both signals before it imports the command line (a second or
more). The handler only records the first signal, whatever the signal's disposition was at launch
(a background job of a script, or `nohup`, starts with SIGINT ignored): nothing is cut off in the
middle. Start-up calls `checkpoint(stage)` between its steps (imports, config, schema upgrade,
accounts, ledger verify); a recorded stop raises `StartupStopped` there, so start-up ends between
two steps, and the command exits 128 + the signal's number (130 for SIGINT, 143 for SIGTERM).
Once the daemon rings, its loop polls the request and stops in order (exit 0). Code may request a
stop too (`set`), as tests and embedders do.
"""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any, Final

#: The signals that ask `openbell run` to stop.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
#: The reason recorded for a stop asked for in code.
REQUESTED: Final = "stop_requested"


class StartupStopped(Exception):
    """A stop was requested while the daemon was starting; start-up ended at a checkpoint.

    Not an `OpenbellError`: nothing failed. `exit_code` is 128 + the signal's number, or 0 for a
    stop requested in code.
    """

    def __init__(self, reason: str, stage: str, exit_code: int) -> None:
        super().__init__(f"stopped ({reason}) during start-up, after {stage}")
        self.reason = reason
        self.stage = stage
        self.exit_code = exit_code


class StopRequest:
    """Whether (and why) the daemon has been asked to stop; the first request wins.

    Safe to set from a signal handler (it only assigns attributes) and to read from any thread.
    """

    def __init__(self) -> None:
        self._reason: str | None = None
        self._signum: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def reason(self) -> str | None:
        """`SIGINT`, `SIGTERM` or `stop_requested`; None while no stop was asked for."""
        return self._reason

    @property
    def exit_code(self) -> int:
        """The exit code of a start-up ended by this request: 128 + signal number, else 0."""
        return 0 if self._signum is None else 128 + self._signum

    def is_set(self) -> bool:
        """Whether a stop was asked for."""
        return self._reason is not None

    def set(self, reason: str = REQUESTED) -> None:
        """Ask for a stop (later requests keep the first reason)."""
        if self._reason is None:
            self._reason = reason

    def checkpoint(self, stage: str) -> None:
        """Raise `StartupStopped` if a stop was asked for; `stage` names the step just done."""
        if self._reason is not None:
            raise StartupStopped(self._reason, stage, self.exit_code)

    def catch_signals(self) -> None:
        """Record SIGINT and SIGTERM in this request from now on, whatever their disposition was
        (main thread only). Calling it again changes nothing."""
        for signum in STOP_SIGNALS:
            if signum not in self._previous:
                self._previous[signum] = signal.signal(signum, self._on_signal)

    def release_signals(self) -> None:
        """Give SIGINT and SIGTERM back the dispositions they had before `catch_signals`."""
        while self._previous:
            signum, previous = self._previous.popitem()
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._reason is None:
            self._signum = signum
            self._reason = signal.Signals(signum).name
