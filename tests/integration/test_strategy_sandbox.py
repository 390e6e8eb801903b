"""The sandbox runs strategy code in its jail and nothing escapes it: a strategy that loops
forever or allocates 10 GB is stopped, one that imports os, socket or subprocess (or reaches them
through a library), opens /etc/passwd or writes a file is blocked, and the weights that come back
are validated. Without the jail (the operator's `allow_unsandboxed`), the child's own walls still
refuse frame walks, files, processes, sockets and imports. The error a run returns is cut and
masked. These runs skip the static check on purpose: the sandbox must hold on its own."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from openbell.agents.strategy_code.sandbox import (
    MAX_ERROR_CHARS,
    RunOutcome,
    RunResult,
    SandboxLimits,
    run_strategy,
    validate_weights,
)
from openbell.markets.domain import Bar, utc
from openbell.store.redact import REDACTED, Redactor
from openbell_testkit.jail import need_jail

LIMITS = SandboxLimits(cpu_s=2, memory_mb=768, wall_s=15.0)
SYMBOLS = ("AAA", "BBB")


def bars(symbol: str, count: int = 60) -> list[Bar]:
    start = utc(2025, 1, 1)
    rows = []
    for day in range(count):
        price = Decimal(100 + (day if symbol == "AAA" else -day / 2))
        rows.append(
            Bar(
                symbol=symbol,
                start_at=start + timedelta(days=day),
                end_at=start + timedelta(days=day + 1),
                open=price,
                high=price + 1,
                low=price - 1,
                close=price,
                volume=Decimal(1000),
            )
        )
    return rows


@pytest.fixture(autouse=True)
def _jailed() -> None:
    need_jail("strategy")


def run(
    code: str,
    limits: SandboxLimits = LIMITS,
    *,
    sandboxed: bool = True,
    redactor: Redactor | None = None,
) -> RunResult:
    data = {symbol: bars(symbol) for symbol in SYMBOLS}
    return asyncio.run(
        run_strategy(
            code, data, offered=SYMBOLS, limits=limits, sandboxed=sandboxed, redactor=redactor
        )
    )


MOMENTUM = """
import pandas as pd

def strategy(bars):
    scores = {s: df["close"].iloc[-1] / df["close"].iloc[-21] - 1 for s, df in bars.items()}
    best = pd.Series(scores).idxmax()
    assert isinstance(bars[best].index, pd.DatetimeIndex)
    assert list(bars[best].columns) == ["open", "high", "low", "close", "volume"]
    return {best: 0.6, "BBB" if best == "AAA" else "AAA": 0.2}
"""


def test_a_strategy_runs_and_its_weights_come_back_exact() -> None:
    result = run(MOMENTUM)
    assert result.outcome is RunOutcome.OK, result.error
    assert result.weights == {"AAA": Decimal("0.6"), "BBB": Decimal("0.2")}
    assert result.duration_ms > 0


def test_a_strategy_that_loops_forever_is_killed() -> None:
    result = run(
        "def strategy(bars):\n    while True:\n        pass\n",
        SandboxLimits(cpu_s=1, memory_mb=768, wall_s=15.0),
    )
    assert result.outcome is RunOutcome.KILLED
    assert "CPU limit is 1 s" in result.error
    assert result.weights == {}


def test_a_strategy_past_the_wall_limit_is_killed() -> None:
    # A CPU limit above the wall limit: the parent's wall clock kills the process group.
    code = "def strategy(bars):\n    return {'AAA': float(sum(range(10**12)) > 0)}\n"
    result = run(code, SandboxLimits(cpu_s=60, memory_mb=768, wall_s=2.0))
    assert result.outcome is RunOutcome.TIMEOUT
    assert result.duration_ms < 10_000


def test_a_strategy_that_allocates_10_gb_is_stopped() -> None:
    code = (
        "import numpy as np\n\ndef strategy(bars):\n"
        "    a = np.ones(10 * 1024**3 // 8)\n    return {'AAA': float(a[0])}\n"
    )
    result = run(code)
    assert result.outcome is RunOutcome.ERROR
    assert "MemoryError" in result.error


def test_a_strategy_that_allocates_10_gb_in_python_is_stopped() -> None:
    code = "def strategy(bars):\n    a = [0.5] * (10 * 1024**3 // 8)\n    return {'AAA': a[0]}\n"
    assert run(code).outcome in (RunOutcome.ERROR, RunOutcome.KILLED)


@pytest.mark.parametrize("module", ["os", "socket", "subprocess", "sys", "shutil"])
def test_importing_outside_the_allow_list_is_blocked(module: str) -> None:
    result = run(f"import {module}\n\ndef strategy(bars):\n    return {{}}\n")
    assert result.outcome is RunOutcome.ERROR
    assert f"import of {module!r} is not allowed" in result.error


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("__import__('os').system('id')", "not allowed"),
        ("getattr(__builtins__, 'open')", "NameError"),
        ("open('/etc/passwd').read()", "NameError"),
        ("eval('1')", "NameError"),
        ("exec('x = 1')", "NameError"),
        ("globals()", "NameError"),
    ],
)
def test_builtins_that_escape_are_missing(body: str, error: str) -> None:
    result = run(f"def strategy(bars):\n    {body}\n    return {{}}\n")
    assert result.outcome is RunOutcome.ERROR
    assert error in result.error


def test_no_file_can_be_written_even_through_a_library(tmp_path: Path) -> None:
    target = tmp_path / "leak.csv"
    result = run(f"def strategy(bars):\n    bars['AAA'].to_csv({str(target)!r})\n    return {{}}\n")
    assert result.outcome is RunOutcome.ERROR
    assert not target.exists()
    opened = tmp_path / "opened.txt"
    result = run(
        "import pandas as pd\n\ndef strategy(bars):\n"
        f"    fd = pd.io.common.os.open({str(opened)!r}, 65)\n    return {{}}\n"
    )
    assert result.outcome is RunOutcome.ERROR
    assert "not allowed in the strategy sandbox" in result.error
    assert not opened.exists()


def test_a_process_cannot_be_started_nor_a_file_removed_through_a_library(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "shell-ran"
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    for body in (
        f"pd.io.common.os.system('touch {marker}')",
        f"pd.io.common.os.unlink({str(victim)!r})",
        "pd.io.common.os.kill(pd.io.common.os.getppid(), 9)",
    ):
        result = run(f"import pandas as pd\n\ndef strategy(bars):\n    {body}\n    return {{}}\n")
        assert result.outcome is RunOutcome.ERROR, body
        assert "not allowed in the strategy sandbox" in result.error
    assert not marker.exists()
    assert victim.read_text() == "keep me"
    assert os.getpid() > 0  # this process (the parent) was not killed


def test_no_network_even_through_a_library() -> None:
    result = run(
        "import pandas as pd\n\ndef strategy(bars):\n"
        "    pd.io.common.urlopen('http://127.0.0.1:9/')\n    return {}\n"
    )
    assert result.outcome is RunOutcome.ERROR
    # urlopen's lazy import of the socket machinery is refused before any socket exists.
    assert "not allowed in the strategy sandbox" in result.error


@pytest.mark.parametrize(
    ("returned", "why"),
    [
        ("{'AAA': 0.7, 'BBB': 0.7}", "above 1"),
        ("{'ZZZ': 0.1}", "not offered"),
        ("{'AAA': -0.1}", "outside [0, 1]"),
        ("{'AAA': float('nan')}", "outside [0, 1]"),
        ("[0.5]", "not a dict"),
    ],
)
def test_invalid_weights_are_refused(returned: str, why: str) -> None:
    result = run(f"def strategy(bars):\n    return {returned}\n")
    assert result.outcome in (RunOutcome.INVALID, RunOutcome.ERROR)
    assert why in result.error


def test_weights_are_rounded_down_and_a_float_overshoot_is_scaled() -> None:
    weights = validate_weights({"A": 0.1 + 0.2, "B": 0.7000000001}, ["A", "B"])
    assert sum(weights.values()) <= 1
    assert weights["A"] == Decimal("0.299999")
    with pytest.raises(ValueError, match="not a number"):
        validate_weights({"A": True}, ["A"])


#: Each reaches what the jail would hide, through the frames of a running generator, a library
#: module's `sys`, or ctypes; without the jail the child's hook must refuse it.
ESCAPES = {
    "frame walk": """
def strategy(bars):
    box = []
    def gen():
        yield box[0].gi_frame.f_back
    box.append(gen())
    return {"AAA": float(next(box[0]) is None)}
""",
    "traceback frame": """
def strategy(bars):
    try:
        1 / 0
    except ZeroDivisionError as exc:
        return {"AAA": float(exc.__traceback__.tb_frame is None)}
""",
    "open through sys": """
import pandas as pd
def strategy(bars):
    pd.core.common.sys.modules["builtins"].open("/etc/hostname").read()
    return {}
""",
    "ctypes fork": """
import pandas as pd
def strategy(bars):
    pd.core.common.sys.modules["ctypes"].CDLL(None).fork()
    return {}
""",
    "new import": """
import pandas as pd
def strategy(bars):
    pd.core.common.sys.modules["builtins"].__import__("smtplib")
    return {}
""",
    "compile": """
import pandas as pd
def strategy(bars):
    pd.core.common.sys.modules["builtins"].compile("1", "x", "eval")
    return {}
""",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
@pytest.mark.parametrize("sandboxed", [True, False], ids=["jailed", "unsandboxed"])
def test_the_childs_own_walls_refuse_escapes_with_or_without_the_jail(
    name: str, sandboxed: bool
) -> None:
    result = run(ESCAPES[name], sandboxed=sandboxed)
    assert result.outcome is RunOutcome.ERROR, result
    assert "is not allowed in the strategy sandbox" in result.error


def test_harmless_pandas_still_works_behind_the_walls() -> None:
    code = """
import pandas as pd

def strategy(bars):
    frame = bars["AAA"].copy()
    frame["fast"] = frame["close"].rolling(5).mean()
    rows = list(frame.tail(3).itertuples())
    text = str(frame.tail(2))
    scores = pd.Series({s: df["close"].iloc[-1] for s, df in bars.items()})
    return {scores.idxmax(): 0.5 if rows and text else 0.0}
"""
    for sandboxed in (True, False):
        result = run(code, sandboxed=sandboxed)
        assert result.outcome is RunOutcome.OK, result.error
        assert result.weights == {"AAA": Decimal("0.5")}


def test_the_error_a_run_returns_is_cut_and_masked() -> None:
    secret = "other-agents-key-Zk3Jp8Qw5Rt2Yv7X"  # noqa: S105  (no pattern knows it)
    code = f"def strategy(bars):\n    raise ValueError({secret!r} + ' tail' * 100000)\n"
    result = run(code, redactor=Redactor([secret]))
    assert result.outcome is RunOutcome.ERROR
    assert result.error.startswith(f"ValueError: {REDACTED} tail")
    assert secret not in result.error
    assert len(result.error) <= MAX_ERROR_CHARS + 40
