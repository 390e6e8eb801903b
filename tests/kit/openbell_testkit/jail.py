"""The OS sandbox in tests: whether it can run here, and which processes a test left behind.

`need_jail(kind)` skips a test that needs bubblewrap where it cannot run (with the reason the
probe gave), or fails it when `OPENBELL_REQUIRE_BWRAP=1` (as CI sets: `make install` installs
bubblewrap there). `processes_with(marker)` finds live processes whose command line or environment
holds a marker string: a hostile payload puts a unique marker in what it starts, and the test
checks that none is left after the run (`left_after`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Literal

import pytest

from openbell.agents.jail.command_jail import command_support
from openbell.agents.strategy_code.sandbox import strategy_support

REQUIRE_ENV = "OPENBELL_REQUIRE_BWRAP"


def need_jail(kind: Literal["strategy", "command"]) -> None:
    """Skip (or, with `OPENBELL_REQUIRE_BWRAP=1`, fail) unless `kind` jails work here."""
    support = strategy_support() if kind == "strategy" else command_support()
    if support.jail is not None:
        return
    message = f"the {kind} jail cannot run here: {support.reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {message}")
    pytest.skip(message)


def processes_with(marker: str) -> list[int]:
    """The live processes (zombies left out) whose command line or environment holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            seen = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X") and marker.encode() in seen:
            found.append(int(entry.name))
    return found


def left_after(marker: str, timeout_s: float = 20.0) -> list[int]:
    """The processes holding `marker` still alive after up to `timeout_s` (a process killed a
    moment ago may take that long to die on a loaded machine: seen past 5 s at a load of 10 on
    two cores; a survivor sleeps for minutes, so the wait never lets one pass)."""
    deadline = time.monotonic() + timeout_s
    left = processes_with(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = processes_with(marker)
    return left
