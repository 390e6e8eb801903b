"""Running a model's strategy code once, in a sandboxed subprocess, on the bars of one slot.

This module owns `run_strategy`: it starts `child.py` with this interpreter in isolated mode
(`python -I`), an empty environment (one BLAS thread), a fresh temporary working directory and its
own process group, sends it the code and the bars as JSON on stdin (no pickle), and reads one JSON
line from its stdout. The child caps its own CPU time, address space and file size and, once the
libraries are loaded, its file descriptors (no file, socket or process can be opened after that),
and runs the code with restricted builtins (`child.py` says how). The parent enforces the wall
time: past `wall_s` the whole process group is killed with SIGKILL, as it is when the call is
cancelled. The weights the code returns are validated here (`validate_weights`) before any order
is placed: each a finite number in [0, 1] for an offered symbol, summing to at most 1.

The sandbox depends on nothing a CI runner may lack (no namespaces, no root): resource limits, an
empty environment and restricted builtins. What it does not stop, the static check
(`lookahead.py`) refuses before the code ever runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal
from pathlib import Path
from typing import Final, Protocol

from openbell.markets.domain import Bar

CHILD: Final = Path(__file__).with_name("child.py")
#: Weights are rounded down to this many places.
WEIGHT_PLACES: Final = Decimal("0.000001")
#: A sum of weights this far above 1 is float noise and is scaled down; above, it is refused.
SUM_TOLERANCE: Final = 1e-6
_MAX_OUTPUT_BYTES: Final = 1_000_000


class RunOutcome(enum.StrEnum):
    """How one run of a strategy ended (stored with the run)."""

    OK = "ok"  # valid weights
    ERROR = "error"  # the code raised (a MemoryError at the memory cap too)
    INVALID = "invalid"  # it returned something that is not valid weights
    TIMEOUT = "timeout"  # killed at the wall limit
    KILLED = "killed"  # killed by a signal (the CPU limit) or died without an answer


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """Per run: CPU seconds, address space in MiB, wall seconds."""

    cpu_s: int = 10
    memory_mb: int = 2048
    wall_s: float = 20.0

    def __post_init__(self) -> None:
        if self.cpu_s <= 0 or self.memory_mb < 256 or self.wall_s <= 0:
            raise ValueError("cpu_s and wall_s must be positive, memory_mb at least 256")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """One run: its outcome, the validated weights (when `ok`), the error, and how long it took."""

    outcome: RunOutcome
    duration_ms: int
    weights: Mapping[str, Decimal] = field(default_factory=dict)
    error: str = ""

    @property
    def ok(self) -> bool:
        """Whether the run gave valid weights."""
        return self.outcome is RunOutcome.OK


def bars_payload(bars: Mapping[str, Sequence[Bar]]) -> dict[str, dict[str, list[object]]]:
    """The bars as the child reads them: per symbol, the bars' start times (ISO, UTC) and their
    open, high, low, close and volume as numbers (floats are fine for a strategy's statistics)."""
    return {
        symbol: {
            "index": [bar.start_at.isoformat() for bar in rows],
            "open": [float(bar.open) for bar in rows],
            "high": [float(bar.high) for bar in rows],
            "low": [float(bar.low) for bar in rows],
            "close": [float(bar.close) for bar in rows],
            "volume": [float(bar.volume) for bar in rows],
        }
        for symbol, rows in bars.items()
    }


def validate_weights(found: object, offered: Sequence[str]) -> Mapping[str, Decimal]:
    """`found` as target weights, or `ValueError` saying why they are not valid.

    Each must be a finite number in [0, 1] for a symbol in `offered`; their sum at most 1 (a sum
    within `SUM_TOLERANCE` above 1 is scaled down). Rounded down to `WEIGHT_PLACES`; zeros kept.
    """
    if not isinstance(found, dict):
        raise ValueError(  # noqa: TRY004  (a bad answer, not a programming error)
            f"weights must be a mapping of symbol to weight, got {found!r:.200}"
        )
    known = set(offered)
    weights: dict[str, float] = {}
    for symbol, weight in found.items():
        if symbol not in known:
            raise ValueError(f"{symbol!r} is not offered at this slot")
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise ValueError(  # noqa: TRY004  (a bad answer, not a programming error)
                f"the weight of {symbol} is not a number: {weight!r:.50}"
            )
        if not math.isfinite(weight) or not 0 <= weight <= 1:
            raise ValueError(f"the weight of {symbol} is {weight}, outside [0, 1]")
        weights[symbol] = float(weight)
    total = math.fsum(weights.values())
    if total > 1 + SUM_TOLERANCE:
        raise ValueError(f"the weights sum to {total:.6f}, above 1 (no leverage)")
    scale = 1 / total if total > 1 else 1.0
    return {
        symbol: Decimal(repr(weight * scale)).quantize(WEIGHT_PLACES, ROUND_DOWN)
        for symbol, weight in sorted(weights.items())
    }


async def run_strategy(
    code: str,
    bars: Mapping[str, Sequence[Bar]],
    *,
    offered: Sequence[str],
    limits: SandboxLimits,
    monotonic: Callable[[], float] = time.monotonic,
) -> RunResult:
    """Run `code`'s `strategy(bars)` once in the sandbox (see the module docstring)."""
    request = json.dumps({"code": code, "bars": bars_payload(bars)}).encode()
    started = monotonic()

    def result(
        outcome: RunOutcome, error: str = "", weights: Mapping[str, Decimal] | None = None
    ) -> RunResult:
        elapsed = round((monotonic() - started) * 1000)
        return RunResult(
            outcome=outcome, duration_ms=elapsed, error=error[:2000], weights=weights or {}
        )

    with tempfile.TemporaryDirectory(prefix="openbell-strategy-") as workdir:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            str(CHILD),
            str(limits.cpu_s),
            str(limits.memory_mb),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
            cwd=workdir,
            start_new_session=True,
        )
        try:
            stdout, stderr = await asyncio.wait_for(
                process.communicate(request), timeout=limits.wall_s
            )
        except TimeoutError:
            return result(RunOutcome.TIMEOUT, f"killed after the wall limit of {limits.wall_s} s")
        finally:
            _kill_group(process.pid)
            with contextlib.suppress(ProcessLookupError):
                await process.wait()
    code_ = process.returncode if process.returncode is not None else -signal.SIGKILL
    if code_ != 0:
        why = f"signal {signal.Signals(-code_).name}" if code_ < 0 else f"exit status {code_}"
        if code_ in (-signal.SIGKILL, -signal.SIGXCPU):
            why += f" (the CPU limit is {limits.cpu_s} s)"
        tail = stderr.decode(errors="replace").strip().splitlines()[-1:]
        return result(RunOutcome.KILLED, f"the strategy process died: {why}. {' '.join(tail)}")
    return _answer(stdout, offered, result)


def _answer(stdout: bytes, offered: Sequence[str], result: _Result) -> RunResult:
    lines = stdout[:_MAX_OUTPUT_BYTES].decode(errors="replace").strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return result(RunOutcome.KILLED, "the strategy process gave no answer")
    if "error" in answer:
        return result(RunOutcome.ERROR, str(answer["error"]))
    try:
        weights = validate_weights(answer.get("weights"), offered)
    except ValueError as exc:
        return result(RunOutcome.INVALID, str(exc))
    return result(RunOutcome.OK, weights=weights)


class _Result(Protocol):
    def __call__(
        self, outcome: RunOutcome, error: str = "", weights: Mapping[str, Decimal] | None = None
    ) -> RunResult: ...


def _kill_group(pid: int) -> None:
    """SIGKILL the child's whole process group (it leads its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
