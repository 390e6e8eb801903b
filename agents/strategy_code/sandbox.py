"""Running a model's strategy code once, in its jail, on the bars of one slot.

This module owns `run_strategy`: it starts `child.py` in the jail (`agents/jail/python_jail.py`:
bubblewrap, new user, PID, network, IPC, UTS and mount namespaces, uid 65534, only the interpreter,
its standard library, numpy, pandas and what they require, read-only; no network, no `/proc`,
nothing of the daemon's files, state or processes), sends it the code and the bars as JSON on
stdin (no pickle), and reads one JSON line from its stdout: pipes are the only way in or out. The
child caps its own CPU time, address space and file size and, once the libraries are loaded, its
file descriptors, and runs the code behind an audit hook and restricted builtins (`child.py` says
how). The parent enforces the wall time: past `wall_s` the jail is killed, everything in it with
it, as it is when the call is cancelled or the run ends. It reads at most `MAX_OUTPUT_BYTES` of
stdout and `MAX_STDERR_BYTES` of stderr. The weights the code returns are validated here
(`validate_weights`) before any order is placed: each a finite number in [0, 1] for an offered
symbol, summing to at most 1. The error a run returns (the model's exception, a refused weight,
why the child died) is cut to `MAX_ERROR_CHARS` and masked by the run's `Redactor` before it goes
anywhere: to the model in a retry prompt, to the trace, the ledger or a log line.

The jail is probed once per process (`strategy_support`): without bubblewrap, or where user
namespaces are refused, strategy code does not run, unless the operator's `[sandbox]
allow_unsandboxed` says it may (`sandboxed=False`): then the child runs as a plain `python -I`
subprocess with an empty environment, in a temporary directory and its own process group, behind
the child's own walls only. What neither stops, the static check (`lookahead.py`) refuses before
the code ever runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import math
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import ROUND_DOWN, Decimal
from functools import cache
from pathlib import Path
from typing import Final, Protocol

from openbell.agents.jail.bwrap import Features, Support, settle
from openbell.agents.jail.process import Capture, Sandboxed, shown, start
from openbell.agents.jail.python_jail import SITE, PythonJail, python_jail
from openbell.markets.domain import Bar
from openbell.markets.errors import ConfigError
from openbell.store.redact import Redactor

CHILD: Final = Path(__file__).with_name("child.py")
#: The packages strategy code may import besides the standard library's math and statistics.
PACKAGES: Final = ("numpy", "pandas")
#: The child's whole environment: one thread for each numerical library.
CHILD_ENV: Final = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
#: Weights are rounded down to this many places.
WEIGHT_PLACES: Final = Decimal("0.000001")
#: A sum of weights this far above 1 is float noise and is scaled down; above, it is refused.
SUM_TOLERANCE: Final = 1e-6
#: What is read of the child's stdout (its answer is the last line) and stderr; the rest is
#: drained and dropped.
MAX_OUTPUT_BYTES: Final = 1_000_000
MAX_STDERR_BYTES: Final = 65_536
#: A run's error, as the model, the trace, the ledger and the logs get it, is cut to this.
MAX_ERROR_CHARS: Final = 2000


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
    sandboxed: bool = True,
    redactor: Redactor | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> RunResult:
    """Run `code`'s `strategy(bars)` once in the sandbox (see the module docstring); unless
    `sandboxed` is False (the operator's `allow_unsandboxed`), in the jail, else `ConfigError`
    saying why there is none. The error a run returns is cut and masked by `redactor`."""
    request = json.dumps({"code": code, "bars": bars_payload(bars)}).encode()
    masking = redactor if redactor is not None else Redactor()
    started = monotonic()

    def result(
        outcome: RunOutcome, error: str = "", weights: Mapping[str, Decimal] | None = None
    ) -> RunResult:
        elapsed = round((monotonic() - started) * 1000)
        return RunResult(
            outcome=outcome,
            duration_ms=elapsed,
            error=shown(error, masking, MAX_ERROR_CHARS) if error else "",
            weights=weights or {},
        )

    args = (str(limits.cpu_s), str(limits.memory_mb))
    with tempfile.TemporaryDirectory(prefix="openbell-strategy-") as workdir:
        if sandboxed:
            jailed, found = strategy_jail()
            process = await start(
                jailed.argv(*args, SITE), jail=(jailed.jail, found), stdin=asyncio.subprocess.PIPE
            )
        else:
            process = await start(
                [sys.executable, "-I", str(CHILD), *args],
                jail=None,
                stdin=asyncio.subprocess.PIPE,
                env=CHILD_ENV,
                cwd=Path(workdir),
            )
        out, err = Capture(MAX_OUTPUT_BYTES), Capture(MAX_STDERR_BYTES)
        try:
            await asyncio.wait_for(_exchange(process, request, out, err), timeout=limits.wall_s)
        except TimeoutError:
            return result(RunOutcome.TIMEOUT, f"killed after the wall limit of {limits.wall_s} s")
        finally:
            await process.kill()
    code_ = process.returncode
    code_ = code_ if code_ is not None else -signal.SIGKILL
    if code_ != 0:
        return result(RunOutcome.KILLED, _died(code_, limits, err))
    return _answer(bytes(out.kept), offered, result)


@cache
def strategy_jail() -> tuple[PythonJail, Features]:
    """The jail strategy code runs in and the bwrap that makes it (probed once: the child's
    interpreter must import numpy and pandas in it); `ConfigError` saying why there is none."""
    support = strategy_support()
    if support.jail is None or support.found is None:
        raise ConfigError(f"strategy code needs the bubblewrap sandbox: {support.reason}")
    return replace(_python_jail(), jail=support.jail), support.found


@cache
def strategy_support() -> Support:
    """Whether strategy code can be jailed here (see `strategy_jail`)."""
    try:
        jailed = _python_jail()
    except LookupError as exc:
        return Support(None, reason=str(exc))
    trial = f"import sys; sys.path.append({SITE!r}); import numpy, pandas"
    argv = [jailed.python, "-I", "-S", "-B", "-c", trial]
    return settle([jailed.jail, replace(jailed.jail, disable_userns=False)], argv)


def _python_jail() -> PythonJail:
    return python_jail(CHILD, packages=PACKAGES, env=CHILD_ENV)


async def _exchange(process: Sandboxed, request: bytes, out: Capture, err: Capture) -> None:
    """Send the request, read both streams to their end and wait for the child."""
    readers = asyncio.gather(out.drain(process.process.stdout), err.drain(process.process.stderr))
    stdin = process.process.stdin
    if stdin is not None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(request)
            await stdin.drain()
        stdin.close()
    await readers
    await process.process.wait()


def _died(code: int, limits: SandboxLimits, err: Capture) -> str:
    """Why the child ended without answering, with the last line it wrote on stderr."""
    if code < 0:
        try:
            why = f"signal {signal.Signals(-code).name}"
        except ValueError:
            why = f"signal {-code}"
    else:
        why = f"exit status {code}"
    if code in (-signal.SIGKILL, -signal.SIGXCPU):
        why += f" (the CPU limit is {limits.cpu_s} s)"
    tail = err.kept.decode(errors="replace").strip().splitlines()[-1:]
    return f"the strategy process died: {why}. {' '.join(tail)}"


def _answer(stdout: bytes, offered: Sequence[str], result: _Result) -> RunResult:
    lines = stdout.decode(errors="replace").strip().splitlines()
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
