"""The `openbell` console script (`ops/entry.py`, `run`) ends the process as the interpreter
would, without clearing the modules one by one: the same exit code, output and `atexit` work as
`sys.exit(main())`, a command that left a thread running still has it joined, and a command that
raised exits the interpreter's way.

Each case runs a command (`main`, replaced in a child process) both ways and compares them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: A child that replaces `main` with `COMMAND` (defined by the case, given `MARK`, a path), then
#: exits through `run` ("run") or the interpreter ("interpreter"). A global's finalizer writes
#: "torn down" to MARK + ".teardown" when the modules are cleared.
_CHILD = """
import atexit, os, sys, threading, time
from pathlib import Path
import openbell.ops.entry as entry

MARK = Path(sys.argv[2])

class Finalized:
    def __del__(self):
        Path(str(MARK) + ".teardown").write_text("torn down")

KEPT = Finalized()
{command}
entry.main = command
if sys.argv[1] == "run":
    entry.run()
sys.exit(entry.main())
"""

CASES = {
    "returns a code, output pending, atexit work": """
def command():
    atexit.register(lambda: MARK.write_text("atexit ran"))
    sys.stdout.write("x" * 100_000)  # no newline: still buffered when the command returns
    sys.stderr.write("to stderr")
    return 3
""",
    "leaves a thread running": """
def command():
    def late():
        time.sleep(0.3)
        MARK.write_text("thread finished")
    threading.Thread(target=late).start()
    print("started")
    return 0
""",
    "raises": """
def command():
    print("before")
    raise ValueError("the command failed")
""",
    "output cannot be flushed": """
def command():
    sys.stdout.write("pending")
    os.close(1)
    return 0
""",
}


def _exit(how: str, command: str, mark: Path) -> tuple[int, str, str, str, bool]:
    script = _CHILD.format(command=textwrap.dedent(command))
    done = subprocess.run(
        [sys.executable, "-c", script, how, str(mark)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},  # output buffered
    )
    marked = mark.read_text() if mark.exists() else ""
    torn_down = Path(f"{mark}.teardown").exists()
    last_line = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    return done.returncode, done.stdout, last_line, marked, torn_down


@pytest.mark.parametrize("case", list(CASES))
def test_run_exits_as_the_interpreter_does(case: str, tmp_path: Path) -> None:
    by_run = _exit("run", CASES[case], tmp_path / "run")
    by_interpreter = _exit("interpreter", CASES[case], tmp_path / "interpreter")
    assert by_run[:4] == by_interpreter[:4]


def test_the_modules_are_not_cleared_after_a_command_that_returned_alone(tmp_path: Path) -> None:
    code, out, _, marked, torn_down = _exit(
        "run", CASES["returns a code, output pending, atexit work"], tmp_path / "m"
    )
    assert (code, len(out), marked, torn_down) == (3, 100_000, "atexit ran", False)
    # The interpreter's exit clears them (the global's finalizer runs): the check can tell.
    assert _exit("interpreter", CASES["raises"], tmp_path / "i")[4] is True
    # A thread still running: the interpreter's exit, the thread joined first.
    code, _, _, marked, torn_down = _exit("run", CASES["leaves a thread running"], tmp_path / "t")
    assert (code, marked, torn_down) == (0, "thread finished", True)


def test_the_console_script_is_run() -> None:
    """The installed `openbell` script calls `run` (pyproject's `[project.scripts]`)."""
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="openbell")
    assert script.value == "openbell.ops.entry:run"
