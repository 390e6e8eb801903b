"""Stop requests: the first stop wins, a checkpoint ends start-up with 128 + the signal's number,
and the signal dispositions of before are given back."""

from __future__ import annotations

import os
import signal

import pytest

from openbell.daemon.stopping import StartupStopped, StopRequest


def test_a_checkpoint_passes_until_a_stop_is_requested() -> None:
    stop = StopRequest()
    stop.checkpoint("config")
    assert not stop.is_set()
    stop.set()
    stop.set("later")
    with pytest.raises(StartupStopped, match="after upgrade") as stopped:
        stop.checkpoint("upgrade")
    assert (stopped.value.reason, stopped.value.stage, stopped.value.exit_code) == (
        "stop_requested",
        "upgrade",
        0,
    )


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_caught_signal_is_recorded_and_the_old_handlers_come_back(
    signum: signal.Signals, code: int
) -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    stop = StopRequest()
    stop.catch_signals()
    try:
        stop.catch_signals()  # twice changes nothing: release still restores the first ones
        os.kill(os.getpid(), signum)
        os.kill(os.getpid(), signal.SIGTERM if signum == signal.SIGINT else signal.SIGINT)
    finally:
        stop.release_signals()
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert stop.reason == signum.name  # the first signal wins
    with pytest.raises(StartupStopped) as stopped:
        stop.checkpoint("imports")
    assert stopped.value.exit_code == code
